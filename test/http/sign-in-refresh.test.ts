import { randomInt } from 'node:crypto';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, expectError, insertVerifiedUser, keysOf, PASSWORD, postJson, refresh, refreshCookieOf, signIn, signUp, type SetCookie, withBearer } from '../helpers/flows.js';

/** SESSION_TTL_SECONDS default (README "Configuration"): absolute session lifetime = cookie Max-Age. */
const SESSION_TTL = 2_592_000;
/** ACCESS_TOKEN_TTL_SECONDS default. */
const ACCESS_TTL = 900;
const USER_FIELDS = ['email', 'id', 'is_email_verified', 'is_phone_verified', 'phone', 'username'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

/** A phone number in stored form, unique enough per call. */
function uniquePhone(): string {
  return `+49170${String(randomInt(0, 100_000_000)).padStart(8, '0')}`;
}

/** Asserts a 401/400/403 Error body: exactly {code, message} with the given code. */

/** Asserts the refresh cookie has exactly the spec's attributes and the given Max-Age. */
function expectRefreshCookieAttributes(cookie: SetCookie, maxAge: number): void {
  expect(cookie.name).toBe('refresh_token');
  expect(cookie.value.length).toBeGreaterThan(0);
  expect(cookie.attributes).toEqual({
    path: '/auth/v0/refresh',
    httponly: true,
    secure: true,
    samesite: 'Strict',
    'max-age': String(maxAge),
  });
}

/** Asserts a 200 sign-in answer: exact SignInResponse shape, cookie attributes, no refresh token in the body. */
function expectSignInOk(res: LightMyRequestResponse, user: { id: string }) {
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json();
  expect(keysOf(body)).toEqual(['session_id', 'tokens', 'user']);
  expect(keysOf(body.tokens)).toEqual(['access_token']);
  expect(keysOf(body.user)).toEqual(USER_FIELDS);
  expect(body.user.id).toBe(user.id);
  expect(body.session_id).toMatch(UUID);
  expect(typeof body.tokens.access_token).toBe('string');
  const cookie = refreshCookieOf(res);
  expectRefreshCookieAttributes(cookie, SESSION_TTL);
  expect(res.body).not.toContain(cookie.value);
  return { body: body as { user: Record<string, unknown>; session_id: string; tokens: { access_token: string } }, cookie };
}

async function getJwks(): Promise<{ res: LightMyRequestResponse; jwks: JSONWebKeySet }> {
  const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json' });
  return { res, jwks: res.json() as JSONWebKeySet };
}

describe('POST /auth/v0/sign-in', () => {
  it('200 by username (any case) with exactly {user, session_id, tokens:{access_token}} and the refresh cookie', async () => {
    const user = await insertVerifiedUser(ctx);
    for (const username of [user.username, user.username.toUpperCase()]) {
      const res = await postJson(ctx, '/auth/v0/sign-in', { username, password: user.password });
      const { body } = expectSignInOk(res, user);
      expect(body.user).toEqual({
        id: user.id,
        username: user.username,
        email: user.email,
        phone: null,
        is_email_verified: true,
        is_phone_verified: false,
      });
    }
  });

  it('200 by email in any case', async () => {
    const user = await insertVerifiedUser(ctx);
    for (const email of [user.email, user.email.toUpperCase(), user.email.replace(/^./, (c) => c.toUpperCase())]) {
      const res = await postJson(ctx, '/auth/v0/sign-in', { email, password: user.password });
      const { body } = expectSignInOk(res, user);
      expect(body.user).toMatchObject({ email: user.email, is_email_verified: true });
    }
  });

  it('200 by phone for a phone-only user (no email to verify), in stored and in loose form', async () => {
    const phone = uniquePhone();
    const { res: up, body: created } = await signUp(ctx, { email: undefined, phone });
    expect(up.statusCode).toBe(201);
    const loose = `${phone.slice(1, 4)} (${phone.slice(4, 7)}) ${phone.slice(7, 10)}-${phone.slice(10)}`;
    for (const p of [phone, loose]) {
      const res = await postJson(ctx, '/auth/v0/sign-in', { phone: p, password: PASSWORD });
      const { body } = expectSignInOk(res, created.user);
      expect(body.user).toEqual({
        id: created.user.id,
        username: created.user.username,
        email: null,
        phone,
        is_email_verified: false,
        is_phone_verified: false,
      });
    }
  });

  it('200 with several identifiers that all name the same user', async () => {
    const phone = uniquePhone();
    const user = await createVerifiedUser(ctx, { phone });
    const combos = [
      { username: user.username, email: user.email },
      { username: user.username, phone },
      { email: user.email.toUpperCase(), phone },
      { username: user.username, email: user.email, phone },
    ];
    for (const ids of combos) {
      const res = await postJson(ctx, '/auth/v0/sign-in', { ...ids, password: user.password });
      const { body } = expectSignInOk(res, user);
      expect(body.user).toMatchObject({ username: user.username, email: user.email, phone });
    }
  });

  it('401 auth.invalid_credentials for an unknown user and a wrong password, with identical bodies', async () => {
    const user = await insertVerifiedUser(ctx);
    const unknown = await postJson(ctx, '/auth/v0/sign-in', { username: 'nobody_here_at_all', password: user.password });
    expectError(unknown, 401, 'auth.invalid_credentials');
    const wrong = await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: `${user.password}!` });
    expectError(wrong, 401, 'auth.invalid_credentials');
    expect(wrong.body).toBe(unknown.body);
    const unknownEmail = await postJson(ctx, '/auth/v0/sign-in', { email: 'nobody@example.test', password: user.password });
    expectError(unknownEmail, 401, 'auth.invalid_credentials');
    expect(unknownEmail.body).toBe(unknown.body);
    for (const r of [unknown, wrong, unknownEmail]) expect(r.headers['set-cookie']).toBeUndefined();
  });

  it('401 auth.invalid_credentials when the identifiers name different users, with either password', async () => {
    const a = await insertVerifiedUser(ctx);
    const b = await insertVerifiedUser(ctx);
    for (const password of [a.password, b.password]) {
      const res = await postJson(ctx, '/auth/v0/sign-in', { username: a.username, email: b.email, password });
      expectError(res, 401, 'auth.invalid_credentials');
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    // One identifier right, the other naming nobody: also not the same user.
    const partial = await postJson(ctx, '/auth/v0/sign-in', { username: a.username, email: 'nobody@example.test', password: a.password });
    expectError(partial, 401, 'auth.invalid_credentials');
  });

  it('403 auth.email_not_verified for the right password on an unverified email; 401 for a wrong one', async () => {
    const { res: up, request } = await signUp(ctx);
    expect(up.statusCode).toBe(201);
    const right = await postJson(ctx, '/auth/v0/sign-in', { username: request.username, password: PASSWORD });
    expectError(right, 403, 'auth.email_not_verified');
    expect(right.headers['set-cookie']).toBeUndefined();
    const wrong = await postJson(ctx, '/auth/v0/sign-in', { username: request.username, password: 'not the password' });
    expectError(wrong, 401, 'auth.invalid_credentials');
    const { rows } = await ctx.db.query('SELECT 1 FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.username = $1', [request.username.toLowerCase()]);
    expect(rows).toHaveLength(0);
  });

  it.each([
    ['no identifier', { password: PASSWORD }],
    ['an unknown member', { username: 'someone', password: PASSWORD, remember_me: true }],
    ['a missing password', { username: 'someone' }],
    ['a number as password', { username: 'someone', password: 12345678 }],
  ])('400 auth.sign_in.validation_failed for %s', async (_what, body) => {
    const res = await postJson(ctx, '/auth/v0/sign-in', body);
    expectError(res, 400, 'auth.sign_in.validation_failed');
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('400 auth.sign_in.validation_failed for malformed JSON', async () => {
    const res = await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-in', headers: { 'content-type': 'application/json' }, payload: '{"username":"a","password":' });
    expectError(res, 400, 'auth.sign_in.validation_failed');
  });

  it('creates one device row and one session row recording ip and user agent', async () => {
    const user = await insertVerifiedUser(ctx);
    const { sessionId, accessToken } = await signIn(ctx, { username: user.username, password: user.password }, { 'user-agent': 'SignInTest/1.0 (vitest)' });
    const now = ctx.clock.now();

    const s = await ctx.db.query<{ user_id: string; device_id: string | null; ip: string | null; user_agent: string | null; created_at: Date; expires_at: Date; revoked_at: Date | null }>(
      'SELECT user_id, device_id, ip, user_agent, created_at, expires_at, revoked_at FROM sessions WHERE user_id = $1',
      [user.id],
    );
    expect(s.rows).toHaveLength(1);
    const row = s.rows[0]!;
    expect(row).toMatchObject({ user_id: user.id, ip: '127.0.0.1', user_agent: 'SignInTest/1.0 (vitest)', revoked_at: null });
    expect(row.device_id).toMatch(UUID);
    expect(new Date(row.created_at).getTime()).toBe(now.getTime());
    expect(new Date(row.expires_at).getTime()).toBe(now.getTime() + SESSION_TTL * 1000);

    const d = await ctx.db.query<{ id: string; user_id: string }>('SELECT id, user_id FROM devices WHERE user_id = $1', [user.id]);
    expect(d.rows).toEqual([{ id: row.device_id, user_id: user.id }]);

    const list = await withBearer(ctx, 'GET', '/auth/v0/sessions', accessToken);
    expect(list.statusCode).toBe(200);
    const sessions = list.json().sessions as Record<string, unknown>[];
    expect(sessions).toHaveLength(1);
    expect(keysOf(sessions[0])).toEqual(['created_at', 'current', 'device_id', 'expires_at', 'id', 'ip', 'last_used_at', 'user_agent']);
    expect(sessions[0]).toMatchObject({
      id: sessionId,
      device_id: row.device_id,
      ip: '127.0.0.1',
      user_agent: 'SignInTest/1.0 (vitest)',
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + SESSION_TTL * 1000).toISOString(),
      current: true,
    });
  });
});

describe('POST /auth/v0/refresh', () => {
  it('200 with exactly {tokens:{access_token}, session_id}, the same session, a new cookie with the remaining lifetime', async () => {
    const user = await insertVerifiedUser(ctx);
    const first = await signIn(ctx, { username: user.username, password: user.password });
    ctx.clock.advance(100);
    const res = await refresh(ctx, first.refreshToken);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(keysOf(body)).toEqual(['session_id', 'tokens']);
    expect(keysOf(body.tokens)).toEqual(['access_token']);
    expect(body.session_id).toBe(first.sessionId);
    const cookie = refreshCookieOf(res);
    expect(cookie.value).not.toBe(first.refreshToken);
    expectRefreshCookieAttributes(cookie, SESSION_TTL - 100);
    expect(res.body).not.toContain(cookie.value);
    expect(res.body).not.toContain(first.refreshToken);
    expect(body.tokens.access_token).not.toBe(first.accessToken);

    const me = await withBearer(ctx, 'GET', '/auth/v0/me', body.tokens.access_token);
    expect(me.statusCode, me.body).toBe(200);
    expect(keysOf(me.json())).toEqual(['session_id', 'user']);
    expect(me.json()).toMatchObject({ session_id: first.sessionId, user: { id: user.id, username: user.username } });

    // The new cookie rotates again.
    const again = await refresh(ctx, cookie.value);
    expect(again.statusCode).toBe(200);
    expect(again.json().session_id).toBe(first.sessionId);
  });

  it('401 auth.missing_refresh_token without a cookie; 401 auth.invalid_refresh_token for garbage and unknown tokens', async () => {
    expectError(await refresh(ctx, undefined), 401, 'auth.missing_refresh_token');
    const other = await ctx.app.inject({ method: 'POST', url: '/auth/v0/refresh', headers: { cookie: 'something_else=abc' } });
    expectError(other, 401, 'auth.missing_refresh_token');
    expectError(await refresh(ctx, 'garbage'), 401, 'auth.invalid_refresh_token');
    expectError(await refresh(ctx, 'A'.repeat(43)), 401, 'auth.invalid_refresh_token');
    expectError(await refresh(ctx, `${'x'.repeat(40)}%27%20OR%201%3D1--`), 401, 'auth.invalid_refresh_token');
  });

  it('reuse of a rotated token answers auth.refresh_token_reused and revokes the whole family', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const t1 = s.refreshToken;
    const r1 = await refresh(ctx, t1);
    expect(r1.statusCode).toBe(200);
    const t2 = refreshCookieOf(r1).value;
    const access2 = r1.json().tokens.access_token as string;
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', access2)).statusCode).toBe(200);

    const reused = await refresh(ctx, t1);
    expectError(reused, 401, 'auth.refresh_token_reused');
    expect(reused.headers['set-cookie'] === undefined || refreshCookieOf(reused).value === '').toBe(true);

    expectError(await refresh(ctx, t2), 401, 'auth.invalid_refresh_token');
    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', access2), 401, 'auth.invalid_access_token');
    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken), 401, 'auth.invalid_access_token');

    const { rows } = await ctx.db.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM sessions WHERE id = $1', [s.sessionId]);
    expect(rows[0]!.revoked_at).not.toBeNull();

    const warning = ctx.logs.find((l) => l.event === 'refresh_token.reused' && l.sessionId === s.sessionId);
    expect(warning).toBeDefined();
    expect(warning).toMatchObject({ level: 40, securityEvent: true, event: 'refresh_token.reused', sessionId: s.sessionId, userId: user.id, ip: '127.0.0.1' });
    for (const line of ctx.rawLogs) {
      expect(line).not.toContain(t1);
      expect(line).not.toContain(t2);
    }
  });

  it('stores only hashes: neither token string appears in refresh_tokens (nor in sessions or devices)', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const r = await refresh(ctx, s.refreshToken);
    expect(r.statusCode).toBe(200);
    const t2 = refreshCookieOf(r).value;
    const tokens = await ctx.db.query<{ j: string }>('SELECT row_to_json(rt)::text AS j FROM refresh_tokens rt WHERE session_id = $1', [s.sessionId]);
    expect(tokens.rows).toHaveLength(2);
    const others = await ctx.db.query<{ j: string }>(
      `SELECT row_to_json(x)::text AS j FROM sessions x WHERE id = $1
       UNION ALL SELECT row_to_json(d)::text FROM devices d WHERE user_id = $2`,
      [s.sessionId, user.id],
    );
    for (const { j } of [...tokens.rows, ...others.rows]) {
      expect(j).not.toContain(s.refreshToken);
      expect(j).not.toContain(t2);
    }
    // Exactly one live (unrotated) token in the family.
    const live = await ctx.db.query('SELECT 1 FROM refresh_tokens WHERE session_id = $1 AND rotated_at IS NULL', [s.sessionId]);
    expect(live.rows).toHaveLength(1);
  });

  it('10 parallel refreshes with one token: at most one 200, all others 401', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const results = await Promise.all(Array.from({ length: 10 }, () => refresh(ctx, s.refreshToken)));
    const ok = results.filter((r) => r.statusCode === 200);
    expect(ok.length).toBeLessThanOrEqual(1);
    for (const r of results.filter((x) => x.statusCode !== 200)) {
      expect(r.statusCode).toBe(401);
      expect(['auth.refresh_token_reused', 'auth.invalid_refresh_token']).toContain(r.json().code);
    }
    const live = await ctx.db.query('SELECT 1 FROM refresh_tokens WHERE session_id = $1 AND rotated_at IS NULL', [s.sessionId]);
    expect(live.rows.length).toBeLessThanOrEqual(1);
  });

  it('refresh does not extend expires_at; after the absolute expiry it answers 401', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const before = await ctx.db.query<{ expires_at: Date }>('SELECT expires_at FROM sessions WHERE id = $1', [s.sessionId]);
    const expiresAt = new Date(before.rows[0]!.expires_at).getTime();

    ctx.clock.advance(SESSION_TTL - 10);
    const late = await refresh(ctx, s.refreshToken);
    expect(late.statusCode, late.body).toBe(200);
    const cookie = refreshCookieOf(late);
    expectRefreshCookieAttributes(cookie, 10);
    const after = await ctx.db.query<{ expires_at: Date }>('SELECT expires_at FROM sessions WHERE id = $1', [s.sessionId]);
    expect(new Date(after.rows[0]!.expires_at).getTime()).toBe(expiresAt);

    ctx.clock.advance(11);
    expectError(await refresh(ctx, cookie.value), 401, 'auth.invalid_refresh_token');
  });

  it('refresh after the 30-day absolute expiry of an untouched session answers 401', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    ctx.clock.advance(SESSION_TTL + 1);
    const res = await refresh(ctx, s.refreshToken);
    expectError(res, 401, 'auth.invalid_refresh_token');
  });

  it('refresh after logout answers 401', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const out = await withBearer(ctx, 'POST', '/auth/v0/logout', s.accessToken);
    expect(out.statusCode).toBe(204);
    expectError(await refresh(ctx, s.refreshToken), 401, 'auth.invalid_refresh_token');
  });
});

describe('access token and JWKS', () => {
  it('the access token is an RS256 at+jwt with the documented claims, verifiable through the JWKS', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const issuedAt = Math.floor(ctx.clock.now().getTime() / 1000);
    const { jwks } = await getJwks();

    const header = decodeProtectedHeader(s.accessToken);
    expect(header).toMatchObject({ alg: 'RS256', typ: 'at+jwt' });
    expect(typeof header.kid).toBe('string');
    expect(jwks.keys.map((k) => k.kid)).toContain(header.kid);

    const claims = decodeJwt(s.accessToken);
    expect(keysOf(claims)).toEqual(['amr', 'aud', 'exp', 'iat', 'iss', 'jti', 'sid', 'sub']);
    // RFC 8176: signed in with a password; a refresh keeps the session's methods.
    expect(claims.amr).toEqual(['pwd']);
    const refreshed = await refresh(ctx, s.refreshToken);
    expect(refreshed.statusCode).toBe(200);
    expect(decodeJwt((refreshed.json() as { tokens: { access_token: string } }).tokens.access_token).amr).toEqual(['pwd']);
    expect(claims.iss).toBe(ctx.config.jwt.issuer);
    expect([claims.aud].flat()).toContain(ctx.config.jwt.audience);
    expect(claims.sub).toBe(user.id);
    expect(claims.sid).toBe(s.sessionId);
    expect(claims.iat).toBe(issuedAt);
    expect(claims.exp).toBe(issuedAt + ACCESS_TTL);
    expect(typeof claims.jti).toBe('string');
    expect((claims.jti as string).length).toBeGreaterThan(0);

    const { payload, protectedHeader } = await jwtVerify(s.accessToken, createLocalJWKSet(jwks), {
      algorithms: ['RS256'],
      issuer: ctx.config.jwt.issuer,
      audience: ctx.config.jwt.audience,
      typ: 'at+jwt',
      currentDate: ctx.clock.now(),
    });
    expect(payload.sub).toBe(user.id);
    expect(protectedHeader.kid).toBe(header.kid);

    // Every token has its own jti.
    const s2 = await signIn(ctx, { username: user.username, password: user.password });
    expect(decodeJwt(s2.accessToken).jti).not.toBe(claims.jti);
  });

  it('GET /auth/v0/.well-known/jwks.json: 200, public cache for 300 s, RSA public members only', async () => {
    const { res, jwks } = await getJwks();
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const directives = String(res.headers['cache-control']).split(',').map((d) => d.trim().toLowerCase());
    expect(directives).toContain('public');
    expect(directives).toContain('max-age=300');
    expect(directives).not.toContain('no-store');
    expect(directives).not.toContain('private');
    expect(Array.isArray(jwks.keys)).toBe(true);
    expect(jwks.keys.length).toBeGreaterThan(0);
    for (const key of jwks.keys) {
      expect(key).toMatchObject({ kty: 'RSA', use: 'sig', alg: 'RS256' });
      for (const member of ['kid', 'n', 'e'] as const) {
        expect(typeof key[member]).toBe('string');
        expect((key[member] as string).length).toBeGreaterThan(0);
      }
      for (const secret of ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k']) expect(key).not.toHaveProperty(secret);
    }
    expect(jwks.keys.map((k) => k.kid)).toContain(ctx.app.keys.signing.kid);
    expect(new Set(jwks.keys.map((k) => k.kid)).size).toBe(jwks.keys.length);
  });
});
