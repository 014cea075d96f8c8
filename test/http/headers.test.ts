/**
 * Response headers and cookies (docs/decisions.md "Caching"; docs/api.md#operations):
 * `Cache-Control: no-store` on everything but the JWKS, which is `public, max-age=300`;
 * `X-Content-Type-Options: nosniff` everywhere; JSON with `charset=utf-8`; CORS only for
 * CORS_ORIGINS; the 16 KiB body cap; the refresh cookie's exact attributes, clearing included.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, createLogger } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createPasswordHasher } from '../../src/crypto/password.js';
import { ERROR_CATALOG, type ErrorCode } from '../../src/errors.js';
import { createTestContext, TEST_ARGON2, type TestContext } from '../helpers/context.js';
import {
  createVerifiedUser,
  latestCode,
  PASSWORD,
  postJson,
  refresh,
  refreshCookieOf,
  setCookies,
  signIn,
  signUp,
  uniqueName,
  withBearer,
  type SetCookie,
} from '../helpers/flows.js';

/** decisions.md: request bodies are capped at 16 KiB. */
const BODY_LIMIT = 16 * 1024;
/** SESSION_TTL_SECONDS default (README "Configuration") = refresh cookie Max-Age at sign-in. */
const SESSION_TTL = 2_592_000;
/** Seconds the clock moves between sign-in and refresh, so the refresh Max-Age is visibly the remainder. */
const ELAPSED_BEFORE_REFRESH = 120;
/** A header larger than Node's default limit for all headers (16 KiB), so Node answers 431. */
const HEADER_OVERFLOW_BYTES = 20 * 1024;
const JSON_UTF8 = 'application/json; charset=utf-8';
const ALLOWED_ORIGIN = 'https://app.example.test';
const EVIL_ORIGIN = 'https://evil.example.test';
/** Origins that are not exactly the allowed one, some of them made to look like it. */
const FOREIGN_ORIGINS = [
  EVIL_ORIGIN,
  'null',
  'http://app.example.test',
  'https://app.example.test:8443',
  'https://app.example.test.evil.example',
  'https://evil-app.example.test',
  'https://APP.example.test',
];

let ctx: TestContext;
let user: { id: string; username: string; email: string; password: string };

beforeAll(async () => {
  ctx = await createTestContext();
  user = await createVerifiedUser(ctx);
});
afterAll(async () => ctx?.close());

/**
 * A second instance of the service on the test database, signing key and clock of `ctx`, with
 * extra settings (CORS_ORIGINS, for example). Cheaper than a second test context. The caller closes it.
 */
async function secondInstance(env: Record<string, string> = {}, beforeReady: (app: FastifyInstance) => void = () => {}): Promise<FastifyInstance> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'auth-headers-'));
  const app = await buildApp({
    config: loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', ...env }),
    db: ctx.db,
    clock: ctx.clock,
    keys: ctx.app.keys,
    passwordHasher: await createPasswordHasher(TEST_ARGON2),
    logger: createLogger('silent'),
    startOutboxWorker: false,
  });
  app.addHook('onClose', async () => rmSync(dataDir, { recursive: true, force: true }));
  beforeReady(app);
  await app.ready();
  return app;
}

function get(url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return ctx.app.inject({ method: 'GET', url, headers });
}

/** The headers every response of this service carries. */
function expectBaseHeaders(res: LightMyRequestResponse): void {
  expect(res.headers['x-content-type-options'], `${res.statusCode} ${res.body}`).toBe('nosniff');
}

/** A response that must not be stored by any cache: `no-store`, nosniff. */
function expectNoStore(res: LightMyRequestResponse): void {
  expectBaseHeaders(res);
  expect(res.headers['cache-control'], `${res.statusCode} ${res.body}`).toBe('no-store');
}

/** A JSON response: no-store, nosniff, `application/json; charset=utf-8`. */
function expectPrivateJson(res: LightMyRequestResponse, status: number): void {
  expect(res.statusCode, res.body).toBe(status);
  expectNoStore(res);
  expect(res.headers['content-type']).toBe(JSON_UTF8);
  expect(() => JSON.parse(res.body)).not.toThrow();
}

/** An Error answer: catalog status, exactly {code, message}, no-store, nosniff, JSON with charset. */
function expectError(res: LightMyRequestResponse, code: ErrorCode): void {
  expectPrivateJson(res, ERROR_CATALOG[code].status);
  expect(res.json()).toEqual({ code, message: expect.any(String) });
}

/** Every header whose name starts with `access-control-`. */
function corsHeaders(res: LightMyRequestResponse): Record<string, unknown> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => name.startsWith('access-control-')));
}

function varyOf(res: LightMyRequestResponse): string[] {
  return String(res.headers.vary ?? '')
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== '');
}

describe('Cache-Control, nosniff and Content-Type', () => {
  it('sign-up, sign-in, refresh, me and sessions: no-store, nosniff, JSON with charset', async () => {
    const created = await signUp(ctx);
    expectPrivateJson(created.res, 201);

    const s = await signIn(ctx, { username: user.username, password: user.password });
    expectPrivateJson(s.res, 200);
    const refreshed = await refresh(ctx, s.refreshToken);
    expectPrivateJson(refreshed, 200);
    expectPrivateJson(await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken), 200);
    expectPrivateJson(await withBearer(ctx, 'GET', '/auth/v0/sessions', s.accessToken), 200);
  });

  it('204 answers (verify-email GET and POST, resend, logout, revoke one, revoke all, change-password): no-store, nosniff, no body', async () => {
    const responses: LightMyRequestResponse[] = [];
    const pending = await signUp(ctx);
    const email = pending.body.user.email!;
    const code = await latestCode(ctx, email);
    responses.push(await get(`/auth/v0/verify-email?email=${encodeURIComponent(email)}&code=${code}`));
    responses.push(await postJson(ctx, '/auth/v0/verify-email', { email, code }));
    responses.push(await postJson(ctx, '/auth/v0/verify-email/resend', { email: `${uniqueName('nobody')}@example.test` }));

    const other = await createVerifiedUser(ctx);
    const s1 = await signIn(ctx, { username: other.username, password: other.password });
    const s2 = await signIn(ctx, { username: other.username, password: other.password });
    const s3 = await signIn(ctx, { username: other.username, password: other.password });
    responses.push(await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${s1.sessionId}`, s2.accessToken));
    responses.push(await withBearer(ctx, 'POST', '/auth/v0/logout', s2.accessToken));
    responses.push(await withBearer(ctx, 'DELETE', '/auth/v0/sessions', s3.accessToken));
    const s4 = await signIn(ctx, { username: other.username, password: other.password });
    responses.push(await withBearer(ctx, 'POST', '/auth/v0/change-password', s4.accessToken, { current_password: other.password, new_password: `${PASSWORD} 2` }));

    for (const res of responses) {
      expect(res.statusCode, res.body).toBe(204);
      expect(res.body).toBe('');
      expectNoStore(res);
    }
  });

  it('GET and HEAD /.well-known/jwks.json: Cache-Control exactly "public, max-age=300" (docs/api.md#operations), nosniff, JSON with charset', async () => {
    for (const method of ['GET', 'HEAD'] as const) {
      const res = await ctx.app.inject({ method, url: '/auth/v0/.well-known/jwks.json' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['cache-control']).toBe('public, max-age=300');
      expectBaseHeaders(res);
      expect(res.headers['content-type']).toBe(JSON_UTF8);
    }
  });

  it('every kind of error: no-store, nosniff, JSON with charset, {code, message}', async () => {
    const pending = await signUp(ctx);
    const pendingEmail = pending.body.user.email!;
    await latestCode(ctx, pendingEmail);
    const other = await createVerifiedUser(ctx);
    const mine = await signIn(ctx, { username: user.username, password: user.password });
    const theirs = await signIn(ctx, { username: other.username, password: other.password });
    const json = { 'content-type': 'application/json' };

    const cases: [ErrorCode, Promise<LightMyRequestResponse>][] = [
      ['auth.sign_up.validation_failed', postJson(ctx, '/auth/v0/sign-up', { username: 'x' })],
      ['auth.sign_in.validation_failed', ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-in', headers: json, payload: '{"username":' })],
      ['auth.verify_email.validation_failed', get('/auth/v0/verify-email?email=a%40example.test&code=12')],
      ['auth.missing_access_token', get('/auth/v0/me')],
      ['auth.invalid_access_token', get('/auth/v0/sessions', { authorization: 'Bearer not.a.jwt' })],
      ['auth.missing_refresh_token', refresh(ctx, undefined)],
      ['auth.invalid_refresh_token', refresh(ctx, 'A'.repeat(43))],
      ['auth.invalid_credentials', postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: 'wrong password here' })],
      ['auth.invalid_current_password', withBearer(ctx, 'POST', '/auth/v0/change-password', mine.accessToken, { current_password: 'wrong password here', new_password: `${PASSWORD} 3` })],
      ['auth.email_not_verified', postJson(ctx, '/auth/v0/sign-in', { email: pendingEmail, password: PASSWORD })],
      ['auth.session_forbidden', withBearer(ctx, 'DELETE', `/auth/v0/sessions/${theirs.sessionId}`, mine.accessToken)],
      ['auth.session_not_found', withBearer(ctx, 'DELETE', '/auth/v0/sessions/00000000-0000-4000-8000-000000000000', mine.accessToken)],
      ['auth.verify_email.user_not_found', postJson(ctx, '/auth/v0/verify-email', { email: `${uniqueName('nobody')}@example.test`, code: '123456' })],
      ['request.not_found', get('/auth/v0/no-such-route')],
      ['request.not_found', ctx.app.inject({ method: 'PUT', url: '/auth/v0/me' })],
      ['auth.sign_up.username_taken', postJson(ctx, '/auth/v0/sign-up', { username: user.username, email: `${uniqueName()}@example.test`, password: PASSWORD })],
      ['auth.verify_email.code_mismatch', postJson(ctx, '/auth/v0/verify-email', { email: pendingEmail, code: '000000' })],
      ['request.body_too_large', ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-in', headers: json, payload: 'x'.repeat(BODY_LIMIT + 1) })],
    ];
    for (const [code, pendingResponse] of cases) expectError(await pendingResponse, code);

    // 429 with Retry-After: the second resend for one address within 60 s (docs/api.md#verification-codes).
    const address = `${uniqueName('resend')}@example.test`;
    expect((await postJson(ctx, '/auth/v0/verify-email/resend', { email: address })).statusCode).toBe(204);
    const limited = await postJson(ctx, '/auth/v0/verify-email/resend', { email: address });
    expectError(limited, 'auth.resend_verification.too_many_attempts');
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
  });

  it('a URL that cannot be percent-decoded (answered before routing): the same headers on its 404', async () => {
    expectError(await get('/auth/v0/%E0%A4%A'), 'request.not_found');
    expectError(await get('/auth/v0/verify-email?email=%E0%A4%A&code=123456'), 'auth.verify_email.validation_failed');
  });
});

/** One HTTP/1.1 response as read off a socket. */
interface RawResponse {
  readonly statusLine: string;
  /** Header names lower-cased. */
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Splits what a socket received into responses (each framed by its Content-Length). */
function parseRawResponses(raw: string): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = raw;
  while (rest.length > 0) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd === -1) throw new Error(`incomplete response: ${JSON.stringify(rest)}`);
    const [statusLine, ...lines] = rest.slice(0, headEnd).split('\r\n');
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    const length = Number(headers['content-length'] ?? 0);
    out.push({ statusLine: statusLine!, headers, body: rest.slice(headEnd + 4, headEnd + 4 + length) });
    rest = rest.slice(headEnd + 4 + length);
  }
  return out;
}

/** Asserts a raw error answer: the status line, exactly {code, message}, and the common headers. */
function expectRawError(res: RawResponse | undefined, statusLine: string, code: ErrorCode): void {
  expect(res?.statusLine).toBe(statusLine);
  expect(res!.headers['cache-control']).toBe('no-store');
  expect(res!.headers['x-content-type-options']).toBe('nosniff');
  expect(res!.headers['content-type']).toBe(JSON_UTF8);
  expect(JSON.parse(res!.body)).toEqual({ code, message: ERROR_CATALOG[code].message });
}

describe('answers Fastify writes outside the route lifecycle (real sockets)', () => {
  /**
   * Opens a connection, writes each chunk in turn (running `between[i]` after chunk i), and
   * returns everything received once the server closes the connection.
   */
  async function exchange(port: number, chunks: string[], between: (() => Promise<unknown>)[] = []): Promise<string> {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString('latin1')));
    const closed = new Promise<void>((resolve, reject) => {
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    for (const [i, chunk] of chunks.entries()) {
      socket.write(chunk);
      await between[i]?.();
    }
    await closed;
    return data;
  }

  async function listening(beforeReady?: (app: FastifyInstance) => void): Promise<{ target: FastifyInstance; port: number }> {
    const target = await secondInstance({}, beforeReady);
    const address = await target.listen({ host: '127.0.0.1', port: 0 });
    return { target, port: Number(new URL(address).port) };
  }

  it('a malformed request (400) and headers over the size limit (431): {code, message} with the common headers', async () => {
    const { target, port } = await listening();
    try {
      const malformed = parseRawResponses(await exchange(port, ['GET /auth/v0/me HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n']));
      expect(malformed).toHaveLength(1);
      expectRawError(malformed[0], 'HTTP/1.1 400 Bad Request', 'request.invalid');

      const huge = parseRawResponses(await exchange(port, [`GET /auth/v0/me HTTP/1.1\r\nHost: x\r\nX-Padding: ${'a'.repeat(HEADER_OVERFLOW_BYTES)}\r\n\r\n`]));
      expect(huge).toHaveLength(1);
      expectRawError(huge[0], 'HTTP/1.1 431 Request Header Fields Too Large', 'request.invalid');
    } finally {
      await target.close();
    }
  });

  it('a request arriving on a kept-alive connection while the server closes: 503 service_unavailable with the common headers', async () => {
    let firstArrived!: () => void;
    const arrived = new Promise<void>((resolve) => (firstArrived = resolve));
    let closeStarted!: () => void;
    const closeHooksRan = new Promise<void>((resolve) => (closeStarted = resolve));
    const { target, port } = await listening((app) => {
      app.addHook('onRequest', async (request) => {
        if (request.url === '/auth/v0/sign-in') firstArrived();
      });
      // Registered after buildApp's own preClose hook, so it runs once the service knows it is closing.
      app.addHook('preClose', async () => closeStarted());
    });
    let closing: Promise<void> | undefined;
    try {
      // The first request is in flight (its body not yet sent) when close() starts, so the
      // connection is not idle and stays open; the second request then arrives on it.
      const raw = await exchange(
        port,
        ['POST /auth/v0/sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n', '{}GET /auth/v0/.well-known/jwks.json HTTP/1.1\r\nHost: x\r\n\r\n'],
        [
          async () => {
            await arrived;
            closing = target.close();
            await closeHooksRan;
          },
        ],
      );
      const [first, second] = parseRawResponses(raw);
      // The request in flight is served as usual.
      expect(first?.statusLine).toBe('HTTP/1.1 400 Bad Request');
      expect(JSON.parse(first!.body)).toMatchObject({ code: 'auth.sign_in.validation_failed' });
      expectRawError(second, 'HTTP/1.1 503 Service Unavailable', 'service_unavailable');
      expect(second!.headers.connection).toBe('close');
    } finally {
      await (closing ?? target.close());
    }
  });
});

describe('body limit: 16 KiB', () => {
  it('a body of exactly 16 KiB is read (and judged on its content); one byte more answers 413 request.body_too_large', async () => {
    const json = { 'content-type': 'application/json' };
    const atLimit = JSON.stringify({ username: 'u'.repeat(BODY_LIMIT - '{"username":""}'.length) });
    expect(Buffer.byteLength(atLimit)).toBe(BODY_LIMIT);
    expectError(await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-in', headers: json, payload: atLimit }), 'auth.sign_in.validation_failed');

    const overLimit = JSON.stringify({ username: 'u'.repeat(BODY_LIMIT + 1 - '{"username":""}'.length) });
    for (const url of ['/auth/v0/sign-in', '/auth/v0/sign-up', '/auth/v0/refresh', '/auth/v0/verify-email/resend']) {
      expectError(await ctx.app.inject({ method: 'POST', url, headers: json, payload: overLimit }), 'request.body_too_large');
    }
  });
});

describe('refresh cookie attributes (docs/api.md#refresh-cookie)', () => {
  /** Exactly one Set-Cookie, the refresh cookie, with exactly Path, HttpOnly, Secure, SameSite=Strict and Max-Age. */
  function expectOnlyRefreshCookie(res: LightMyRequestResponse, maxAge: number): SetCookie {
    const all = setCookies(res);
    expect(all.map((c) => c.name)).toEqual(['refresh_token']);
    const cookie = refreshCookieOf(res);
    expect(cookie.attributes).toEqual({
      path: '/auth/v0/refresh',
      httponly: true,
      secure: true,
      samesite: 'Strict',
      'max-age': String(maxAge),
    });
    return cookie;
  }

  function expectClearingCookie(res: LightMyRequestResponse): void {
    expect(res.statusCode, res.body).toBe(204);
    expect(expectOnlyRefreshCookie(res, 0).value).toBe('');
  }

  it('sign-in sets it with Max-Age = SESSION_TTL_SECONDS; refresh with the remaining lifetime', async () => {
    const s = await signIn(ctx, { username: user.username, password: user.password });
    expect(expectOnlyRefreshCookie(s.res, SESSION_TTL).value).toMatch(/^[A-Za-z0-9_-]{64}$/);
    ctx.clock.advance(ELAPSED_BEFORE_REFRESH);
    const res = await refresh(ctx, s.refreshToken);
    expect(res.statusCode, res.body).toBe(200);
    expect(expectOnlyRefreshCookie(res, SESSION_TTL - ELAPSED_BEFORE_REFRESH).value).toMatch(/^[A-Za-z0-9_-]{64}$/);
  });

  it('logout, DELETE /sessions and change-password clear it: empty value, Max-Age=0, same attributes', async () => {
    const other = await createVerifiedUser(ctx);
    const login = () => signIn(ctx, { username: other.username, password: other.password });
    expectClearingCookie(await withBearer(ctx, 'POST', '/auth/v0/logout', (await login()).accessToken));
    expectClearingCookie(await withBearer(ctx, 'DELETE', '/auth/v0/sessions', (await login()).accessToken));
    expectClearingCookie(
      await withBearer(ctx, 'POST', '/auth/v0/change-password', (await login()).accessToken, { current_password: other.password, new_password: `${PASSWORD} new` }),
    );
  });

  it('no other answer sets a cookie: revoke one session (docs/api.md#revoke-one-session), me, sessions, JWKS, errors', async () => {
    const a = await signIn(ctx, { username: user.username, password: user.password });
    const b = await signIn(ctx, { username: user.username, password: user.password });
    const responses = [
      await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${a.sessionId}`, b.accessToken),
      await withBearer(ctx, 'GET', '/auth/v0/me', b.accessToken),
      await withBearer(ctx, 'GET', '/auth/v0/sessions', b.accessToken),
      await get('/auth/v0/.well-known/jwks.json'),
      await get('/auth/v0/me'),
      await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: 'wrong password here' }),
    ];
    for (const res of responses) expect(res.headers['set-cookie'], `${res.statusCode} ${res.body}`).toBeUndefined();
  });
});

describe('CORS', () => {
  let corsApp: FastifyInstance;
  beforeAll(async () => {
    corsApp = await secondInstance({ CORS_ORIGINS: ALLOWED_ORIGIN });
  });
  afterAll(async () => corsApp?.close());

  function preflight(target: FastifyInstance, url: string, origin: string, method: string, requestHeaders?: string): Promise<LightMyRequestResponse> {
    return target.inject({
      method: 'OPTIONS',
      url,
      headers: { origin, 'access-control-request-method': method, ...(requestHeaders === undefined ? {} : { 'access-control-request-headers': requestHeaders }) },
    });
  }

  function methodsOf(res: LightMyRequestResponse): string[] {
    return String(res.headers['access-control-allow-methods'] ?? '')
      .split(',')
      .map((m) => m.trim().toUpperCase());
  }

  it.each([
    ['POST', '/auth/v0/sign-in', 'content-type'],
    ['POST', '/auth/v0/refresh', undefined],
    ['GET', '/auth/v0/me', 'authorization'],
    ['GET', '/auth/v0/sessions', 'authorization'],
    ['DELETE', '/auth/v0/sessions', 'authorization'],
    ['DELETE', '/auth/v0/sessions/00000000-0000-4000-8000-000000000000', 'authorization'],
    ['POST', '/auth/v0/change-password', 'authorization, content-type'],
    ['PATCH', '/auth/v0/passkeys/00000000-0000-4000-8000-000000000000', 'authorization, content-type'],
    ['POST', '/auth/v0/sign-in/passkey', 'content-type'],
  ])('preflight from the allowed origin for %s %s: that origin, credentials, the method and headers allowed', async (method, url, requestHeaders) => {
    const res = await preflight(corsApp, url, ALLOWED_ORIGIN, method, requestHeaders);
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ALLOWED_ORIGIN);
    expect(res.headers['access-control-allow-credentials']).toBe('true');
    expect(methodsOf(res)).toContain(method);
    for (const header of requestHeaders?.split(',') ?? []) {
      expect(String(res.headers['access-control-allow-headers']).toLowerCase()).toContain(header.trim());
    }
    expect(varyOf(res)).toContain('origin');
    expectNoStore(res);
  });

  it('actual requests from the allowed origin carry the origin and credentials, errors included (so the app can read them)', async () => {
    const origin = { origin: ALLOWED_ORIGIN };
    const responses = [
      await corsApp.inject({ method: 'POST', url: '/auth/v0/sign-in', headers: { ...origin, 'content-type': 'application/json' }, payload: { username: 'nobody_here', password: 'wrong password here' } }),
      await corsApp.inject({ method: 'GET', url: '/auth/v0/me', headers: origin }),
      await corsApp.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json', headers: origin }),
    ];
    expect(responses.map((r) => r.statusCode)).toEqual([401, 401, 200]);
    for (const res of responses) {
      expect(res.headers['access-control-allow-origin']).toBe(ALLOWED_ORIGIN);
      expect(res.headers['access-control-allow-credentials']).toBe('true');
      // The JWKS is publicly cacheable: a shared cache must keep per-origin variants apart.
      expect(varyOf(res)).toContain('origin');
      expectBaseHeaders(res);
    }
  });

  /** The names in `Access-Control-Expose-Headers`, lower-cased. */
  function exposedOf(res: LightMyRequestResponse): string[] {
    return String(res.headers['access-control-expose-headers'] ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter((h) => h !== '');
  }

  it('actual answers to the allowed origin expose Retry-After and X-Request-Id (a script on that origin can honour a 429 and report the request id), a 429 and a preflight-less simple GET included', async () => {
    // Sign-in locked after one failure per identifier, on an instance of its own.
    const limited = await secondInstance({ CORS_ORIGINS: ALLOWED_ORIGIN, RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '1' });
    try {
      const username = uniqueName('cors429');
      const attempt = () =>
        limited.inject({
          method: 'POST',
          url: '/auth/v0/sign-in',
          remoteAddress: '203.0.113.29',
          headers: { origin: ALLOWED_ORIGIN, 'content-type': 'application/json' },
          payload: { username, password: 'wrong password here' },
        });
      const failed = await attempt();
      const tooMany = await attempt();
      expect([failed.statusCode, tooMany.statusCode]).toEqual([401, 429]);
      expect(Number(tooMany.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      // A simple request: a GET with no header a preflight would be needed for.
      const simple = await limited.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json', headers: { origin: ALLOWED_ORIGIN } });
      expect(simple.statusCode).toBe(200);
      for (const res of [failed, tooMany, simple]) {
        expect(res.headers['access-control-allow-origin'], `${res.statusCode}`).toBe(ALLOWED_ORIGIN);
        expect(exposedOf(res), `${res.statusCode}`).toEqual(expect.arrayContaining(['retry-after', 'x-request-id']));
        expect(res.headers['x-request-id']).toEqual(expect.any(String));
      }
    } finally {
      await limited.close();
    }
  });

  it('a foreign origin is exposed nothing', async () => {
    const res = await corsApp.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json', headers: { origin: EVIL_ORIGIN } });
    expect(res.headers['access-control-expose-headers']).toBeUndefined();
  });

  it.each(FOREIGN_ORIGINS)('origin %s: no CORS header at all, never reflected, never *', async (origin) => {
    const responses = [
      await preflight(corsApp, '/auth/v0/sign-in', origin, 'POST', 'content-type'),
      await preflight(corsApp, '/auth/v0/sessions', origin, 'DELETE', 'authorization'),
      await corsApp.inject({ method: 'POST', url: '/auth/v0/sign-in', headers: { origin, 'content-type': 'application/json' }, payload: { username: 'nobody_here', password: 'wrong password here' } }),
      await corsApp.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json', headers: { origin } }),
    ];
    for (const res of responses) {
      expect(corsHeaders(res), `${res.statusCode} ${res.body}`).toEqual({});
      expectBaseHeaders(res);
    }
    // Caches must not hand a foreign origin's answer to the allowed one (or the reverse).
    expect(varyOf(responses[3]!)).toContain('origin');
    // The refused preflight is an ordinary 404 error.
    expectError(responses[0]!, 'request.not_found');
  });

  it('requests without an Origin header get no CORS headers', async () => {
    const res = await corsApp.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json' });
    expect(corsHeaders(res)).toEqual({});
  });

  it('without CORS_ORIGINS: no CORS headers at all, even for the origin another deployment allows', async () => {
    const responses = [
      await preflight(ctx.app, '/auth/v0/sign-in', ALLOWED_ORIGIN, 'POST', 'content-type'),
      await preflight(ctx.app, '/auth/v0/sessions', EVIL_ORIGIN, 'DELETE', 'authorization'),
      await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-in', headers: { origin: ALLOWED_ORIGIN, 'content-type': 'application/json' }, payload: { username: 'nobody_here', password: 'wrong password here' } }),
      await ctx.app.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json', headers: { origin: ALLOWED_ORIGIN } }),
    ];
    expect(responses.map((r) => r.statusCode)).toEqual([404, 404, 401, 200]);
    for (const res of responses) {
      expect(corsHeaders(res), `${res.statusCode} ${res.body}`).toEqual({});
      expectBaseHeaders(res);
    }
  });
});
