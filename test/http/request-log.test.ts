/**
 * Structured request logs: one JSON line per request with `reqId`, `method`,
 * `route` (pattern), `path` (no query), `status`, `durationMs` and `ip`; the request id taken
 * from a sane incoming `X-Request-Id` or generated, and echoed in the response; never a query
 * string, a secret, a cookie or an Authorization header; pretty output only for a terminal.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prettyDestination, requestIdOf, SANE_REQUEST_ID } from '../../src/plugins/request-log.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, postJson, refresh, signIn, withBearer } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The log lines of one request, by its id (from the response header). */
function linesOf(res: LightMyRequestResponse): Record<string, unknown>[] {
  const id = res.headers['x-request-id'];
  expect(typeof id).toBe('string');
  return ctx.logs.filter((l) => l.reqId === id);
}

/** The one `request completed` line of a response. */
function requestLine(res: LightMyRequestResponse): Record<string, unknown> {
  const lines = linesOf(res).filter((l) => l.msg === 'request completed');
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

describe('one line per request', () => {
  it('has reqId, method, route pattern, path without query, status, durationMs and ip, at info', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const other = await signIn(ctx, { username: user.username, password: user.password });
    const res = await ctx.app.inject({ method: 'DELETE', url: `/auth/v0/sessions/${other.sessionId}?trace=1`, headers: { authorization: `Bearer ${s.accessToken}` } });
    expect(res.statusCode).toBe(204);
    const line = requestLine(res);
    expect(line).toMatchObject({
      level: 30,
      msg: 'request completed',
      method: 'DELETE',
      route: '/auth/v0/sessions/:session_id',
      path: `/auth/v0/sessions/${other.sessionId}`,
      status: 204,
      ip: '127.0.0.1',
    });
    expect(line.reqId).toMatch(UUID);
    expect(typeof line.durationMs).toBe('number');
    expect(line.durationMs as number).toBeGreaterThanOrEqual(0);
    // Fastify's own two lines per request are off.
    expect(ctx.logs.some((l) => l.msg === 'incoming request')).toBe(false);
    expect(linesOf(res).every((l) => !('req' in l) && !('res' in l))).toBe(true);
  });

  it('logs errors and unknown routes the same way (no route for a 404)', async () => {
    const denied = await ctx.app.inject({ method: 'GET', url: '/auth/v0/me' });
    expect(requestLine(denied)).toMatchObject({ route: '/auth/v0/me', path: '/auth/v0/me', status: 401, method: 'GET' });
    const missing = await ctx.app.inject({ method: 'GET', url: '/nowhere/at/all?secret=1' });
    const line = requestLine(missing);
    expect(line).toMatchObject({ path: '/nowhere/at/all', status: 404 });
    expect(line.route).toBeUndefined();
    expect(missing.headers['x-request-id']).toBe(line.reqId);
  });

  it('never writes the query string, tokens, cookies or the Authorization header', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const from = ctx.rawLogs.length;
    const verify = await ctx.app.inject({ method: 'GET', url: `/auth/v0/verify-email?email=${encodeURIComponent(user.email)}&code=482913` });
    expect(requestLine(verify).path).toBe('/auth/v0/verify-email');
    await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken);
    const rotated = await refresh(ctx, s.refreshToken);
    expect(rotated.statusCode).toBe(200);
    await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: user.password });
    const text = ctx.rawLogs.slice(from).join('\n');
    for (const secret of ['482913', encodeURIComponent(user.email), s.accessToken, s.accessToken.split('.')[2]!, s.refreshToken, user.password, 'refresh_token=', 'Bearer ']) {
      expect(text.includes(secret), secret).toBe(false);
    }
  });
});

describe('X-Request-Id', () => {
  it('keeps a sane incoming id, logs it as reqId and echoes it', async () => {
    for (const id of ['abc', 'req-1.2_3', randomUUID(), 'x'.repeat(128), '01HZY3K9M4G7Q2ZJ8V6W5T1R0S']) {
      const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/me', headers: { 'x-request-id': id } });
      expect(res.headers['x-request-id']).toBe(id);
      expect(requestLine(res).reqId).toBe(id);
    }
  });

  it('replaces an insane one with a generated UUID (too long, spaces, quotes, commas, JSON, non-ASCII)', async () => {
    for (const id of ['x'.repeat(129), 'a b', 'a"b', 'a,b', '{"level":60}', '../../etc', 'é', '']) {
      const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/me', headers: { 'x-request-id': id } });
      const echoed = res.headers['x-request-id'] as string;
      expect(echoed, JSON.stringify(id)).toMatch(UUID);
      expect(requestLine(res).reqId).toBe(echoed);
    }
  });

  it('generates distinct ids, and sends the header on success, errors and health probes', async () => {
    const ids = new Set<string>();
    for (const url of ['/healthz', '/readyz', '/auth/v0/.well-known/jwks.json', '/auth/v0/me', '/nowhere']) {
      const res = await ctx.app.inject({ method: 'GET', url });
      expect(res.headers['x-request-id'], url).toMatch(UUID);
      ids.add(res.headers['x-request-id'] as string);
    }
    expect(ids.size).toBe(5);
    const invalid = await postJson(ctx, '/auth/v0/sign-up', { nope: true });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.headers['x-request-id']).toMatch(UUID);
  });

  it('SANE_REQUEST_ID and requestIdOf follow the documented rule', () => {
    expect(SANE_REQUEST_ID.test('a'.repeat(128))).toBe(true);
    expect(SANE_REQUEST_ID.test('a'.repeat(129))).toBe(false);
    expect(requestIdOf({ headers: { 'x-request-id': 'trace-7' } } as never)).toBe('trace-7');
    expect(requestIdOf({ headers: {} } as never)).toMatch(UUID);
  });
});

describe('pretty output for a terminal', () => {
  it('prettyDestination writes human-readable lines, not JSON', async () => {
    const chunks: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk.toString('utf8'));
        done();
      },
    });
    const logger = pino({ level: 'info' }, prettyDestination(sink));
    logger.info({ route: '/auth/v0/me', status: 200 }, 'request completed');
    await new Promise((r) => setImmediate(r));
    const text = chunks.join('');
    expect(text).toContain('request completed');
    expect(text).toContain('/auth/v0/me');
    expect(() => JSON.parse(text)).toThrow();
  });
});
