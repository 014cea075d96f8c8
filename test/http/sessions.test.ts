import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { expectError, insertVerifiedUser, keysOf, postJson, refresh, refreshCookieOf, setCookies, signIn, withBearer } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

const SESSION_FIELDS = ['created_at', 'current', 'device_id', 'expires_at', 'id', 'ip', 'last_used_at', 'user_agent'];
const USER_FIELDS = ['email', 'id', 'is_email_verified', 'is_phone_verified', 'phone', 'username'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** RFC 3339 date-time as `Date.toISOString` writes it. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const THIRTY_DAYS_MS = 30 * 24 * 60 * 60 * 1000;
const NEW_PASSWORD = 'a completely different passphrase';

interface WireSession {
  id: string;
  device_id: string | null;
  ip: string | null;
  user_agent: string | null;
  created_at: string;
  last_used_at: string | null;
  expires_at: string;
  current: boolean;
}

/** Asserts an Error body (docs/api.md#error-body): exactly `{code, message}`, JSON, with the given status and code. */

/** Asserts exactly one refresh_token clearing cookie (docs/api.md#refresh-cookie). */
function expectClearingCookie(res: LightMyRequestResponse): void {
  const cookies = setCookies(res).filter((c) => c.name === 'refresh_token');
  expect(cookies).toHaveLength(1);
  const c = cookies[0]!;
  expect(c.value).toBe('');
  expect(c.attributes['max-age']).toBe('0');
  expect(c.attributes.path).toBe('/auth/v0/refresh');
  expect(c.attributes.httponly).toBe(true);
  expect(c.attributes.secure).toBe(true);
  expect(c.attributes.samesite).toBe('Strict');
}

/** A 204 with no body. */
function expectNoContent(res: LightMyRequestResponse): void {
  expect(res.statusCode, res.body).toBe(204);
  expect(res.body).toBe('');
}

async function me(token: string): Promise<LightMyRequestResponse> {
  return withBearer(ctx, 'GET', '/auth/v0/me', token);
}

async function listSessions(token: string): Promise<WireSession[]> {
  const res = await withBearer(ctx, 'GET', '/auth/v0/sessions', token);
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json() as { sessions: WireSession[] };
  expect(keysOf(body)).toEqual(['sessions']);
  return body.sessions;
}

function changePassword(token: string, body: unknown): Promise<LightMyRequestResponse> {
  return withBearer(ctx, 'POST', '/auth/v0/change-password', token, body);
}

/** Sign-in with the user's password, answering the raw response (no throw). */
function trySignIn(username: string, password: string): Promise<LightMyRequestResponse> {
  return postJson(ctx, '/auth/v0/sign-in', { username, password });
}

describe('GET /auth/v0/me', () => {
  it('200 with exactly {user, session_id} of the caller', async () => {
    const user = await insertVerifiedUser(ctx);
    const { accessToken, sessionId } = await signIn(ctx, { username: user.username, password: user.password });
    const res = await me(accessToken);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = res.json();
    expect(keysOf(body)).toEqual(['session_id', 'user']);
    expect(keysOf(body.user)).toEqual(USER_FIELDS);
    expect(body).toEqual({
      session_id: sessionId,
      user: { id: user.id, username: user.username, email: user.email, phone: null, is_email_verified: true, is_phone_verified: false },
    });
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('401 auth.missing_access_token without a token, auth.invalid_access_token with a bad one', async () => {
    expectError(await ctx.app.inject({ method: 'GET', url: '/auth/v0/me' }), 401, 'auth.missing_access_token');
    expectError(await me('not.a.jwt'), 401, 'auth.invalid_access_token');
    expectError(await ctx.app.inject({ method: 'GET', url: '/auth/v0/me', headers: { authorization: 'Basic dXNlcjpwYXNz' } }), 401, 'auth.invalid_access_token');
  });
});

describe('GET /auth/v0/sessions', () => {
  it('lists exactly the 3 active sessions of the caller with the Session fields, one of them current', async () => {
    const user = await insertVerifiedUser(ctx);
    const agents = ['agent-one/1.0', 'agent-two/2.0', 'agent-three/3.0'];
    const signIns = [];
    for (const ua of agents) signIns.push(await signIn(ctx, { username: user.username, password: user.password }, { 'user-agent': ua }));
    const caller = signIns[1]!;

    const sessions = await listSessions(caller.accessToken);
    expect(sessions).toHaveLength(3);
    expect(sessions.map((s) => s.id).sort()).toEqual(signIns.map((s) => s.sessionId).sort());
    for (const s of sessions) {
      expect(keysOf(s)).toEqual(SESSION_FIELDS);
      expect(s.id).toMatch(UUID);
      expect(s.device_id).toMatch(UUID);
      expect(s.ip).toEqual(expect.any(String));
      expect(s.created_at).toMatch(DATE_TIME);
      expect(s.last_used_at).toMatch(DATE_TIME);
      expect(s.expires_at).toMatch(DATE_TIME);
      expect(Date.parse(s.expires_at) - Date.parse(s.created_at)).toBe(THIRTY_DAYS_MS);
      expect(typeof s.current).toBe('boolean');
    }
    expect(sessions.map((s) => s.user_agent).sort()).toEqual([...agents].sort());
    expect(new Set(sessions.map((s) => s.device_id)).size).toBe(3);
    const current = sessions.filter((s) => s.current);
    expect(current).toHaveLength(1);
    expect(current[0]!.id).toBe(caller.sessionId);
    expect(current[0]!.user_agent).toBe('agent-two/2.0');

    // Seen from another of the sessions, `current` moves with the caller.
    const fromFirst = await listSessions(signIns[0]!.accessToken);
    expect(fromFirst.filter((s) => s.current).map((s) => s.id)).toEqual([signIns[0]!.sessionId]);
  });

  it('does not list revoked sessions nor another user\'s sessions', async () => {
    const user = await insertVerifiedUser(ctx);
    const other = await insertVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: user.password });
    const b = await signIn(ctx, { username: user.username, password: user.password });
    const c = await signIn(ctx, { username: user.username, password: user.password });
    const foreign = await signIn(ctx, { username: other.username, password: other.password });

    expectNoContent(await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${b.sessionId}`, a.accessToken));
    expectNoContent(await withBearer(ctx, 'POST', '/auth/v0/logout', c.accessToken));

    const sessions = await listSessions(a.accessToken);
    expect(sessions.map((s) => s.id)).toEqual([a.sessionId]);
    expect(sessions[0]!.current).toBe(true);
    expect(sessions.map((s) => s.id)).not.toContain(foreign.sessionId);

    const theirs = await listSessions(foreign.accessToken);
    expect(theirs.map((s) => s.id)).toEqual([foreign.sessionId]);
  });

  it('does not list expired sessions', async () => {
    const user = await insertVerifiedUser(ctx);
    const old = await signIn(ctx, { username: user.username, password: user.password });
    // 10 minutes before the old session ends, a new one starts; 11 minutes later the old one has expired.
    ctx.clock.advance(30 * 24 * 3600 - 600);
    const fresh = await signIn(ctx, { username: user.username, password: user.password });
    const before = await listSessions(fresh.accessToken);
    expect(before.map((s) => s.id).sort()).toEqual([old.sessionId, fresh.sessionId].sort());
    ctx.clock.advance(660);
    const after = await listSessions(fresh.accessToken);
    expect(after.map((s) => s.id)).toEqual([fresh.sessionId]);
    // The expired session's refresh token no longer works either.
    expectError(await refresh(ctx, old.refreshToken), 401, 'auth.invalid_refresh_token');
  });

  it('401 without a token', async () => {
    expectError(await ctx.app.inject({ method: 'GET', url: '/auth/v0/sessions' }), 401, 'auth.missing_access_token');
  });
});

describe('last_used_at', () => {
  it('is updated by authenticated requests at most once a minute', async () => {
    const user = await insertVerifiedUser(ctx);
    const observed = await signIn(ctx, { username: user.username, password: user.password });
    const observer = await signIn(ctx, { username: user.username, password: user.password });
    const lastUsed = async (): Promise<string | null> => (await listSessions(observer.accessToken)).find((s) => s.id === observed.sessionId)!.last_used_at;

    const start = await lastUsed();
    expect(start).toMatch(DATE_TIME);

    ctx.clock.advance(30);
    expect((await me(observed.accessToken)).statusCode).toBe(200);
    expect(await lastUsed()).toBe(start);

    ctx.clock.advance(31); // 61 s after the last write
    expect((await me(observed.accessToken)).statusCode).toBe(200);
    const touched = await lastUsed();
    expect(touched).toBe(ctx.clock.now().toISOString());
    expect(Date.parse(touched!) - Date.parse(start!)).toBe(61_000);

    ctx.clock.advance(30); // 30 s after that write
    expect((await me(observed.accessToken)).statusCode).toBe(200);
    expect(await lastUsed()).toBe(touched);

    ctx.clock.advance(31);
    expect((await withBearer(ctx, 'GET', '/auth/v0/sessions', observed.accessToken)).statusCode).toBe(200);
    expect(await lastUsed()).toBe(ctx.clock.now().toISOString());
  });

  it('is updated by refreshes at most once a minute', async () => {
    const user = await insertVerifiedUser(ctx);
    const observed = await signIn(ctx, { username: user.username, password: user.password });
    const observer = await signIn(ctx, { username: user.username, password: user.password });
    const lastUsed = async (): Promise<string | null> => (await listSessions(observer.accessToken)).find((s) => s.id === observed.sessionId)!.last_used_at;
    let token = observed.refreshToken;
    const refreshed = async (): Promise<void> => {
      const res = await refresh(ctx, token);
      expect(res.statusCode, res.body).toBe(200);
      token = refreshCookieOf(res).value;
    };

    const start = await lastUsed();
    ctx.clock.advance(30);
    await refreshed();
    expect(await lastUsed()).toBe(start);

    ctx.clock.advance(31); // 61 s after the last write
    await refreshed();
    expect(await lastUsed()).toBe(ctx.clock.now().toISOString());
  });
});

describe('DELETE /auth/v0/sessions/{session_id}', () => {
  it('204 for an own other session, which then ends; the caller\'s session goes on; no Set-Cookie', async () => {
    const user = await insertVerifiedUser(ctx);
    const caller = await signIn(ctx, { username: user.username, password: user.password });
    const target = await signIn(ctx, { username: user.username, password: user.password });

    const res = await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${target.sessionId}`, caller.accessToken);
    expectNoContent(res);
    expect(res.headers['set-cookie']).toBeUndefined();

    expectError(await me(target.accessToken), 401, 'auth.invalid_access_token');
    expectError(await refresh(ctx, target.refreshToken), 401, 'auth.invalid_refresh_token');
    expect((await me(caller.accessToken)).statusCode).toBe(200);
    expect((await refresh(ctx, caller.refreshToken)).statusCode).toBe(200);

    // Again, for the already revoked own session: still 204.
    const again = await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${target.sessionId}`, caller.accessToken);
    expectNoContent(again);
    expect(again.headers['set-cookie']).toBeUndefined();
  });

  it('accepts the session id in upper case', async () => {
    const user = await insertVerifiedUser(ctx);
    const caller = await signIn(ctx, { username: user.username, password: user.password });
    const target = await signIn(ctx, { username: user.username, password: user.password });
    expectNoContent(await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${target.sessionId.toUpperCase()}`, caller.accessToken));
    expectError(await me(target.accessToken), 401, 'auth.invalid_access_token');
  });

  it('403 auth.session_forbidden for another user\'s session, which stays active', async () => {
    const user = await insertVerifiedUser(ctx);
    const other = await insertVerifiedUser(ctx);
    const caller = await signIn(ctx, { username: user.username, password: user.password });
    const foreign = await signIn(ctx, { username: other.username, password: other.password });

    const res = await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${foreign.sessionId}`, caller.accessToken);
    expectError(res, 403, 'auth.session_forbidden');
    expect(res.headers['set-cookie']).toBeUndefined();

    expect((await me(foreign.accessToken)).statusCode).toBe(200);
    expect((await listSessions(foreign.accessToken)).map((s) => s.id)).toEqual([foreign.sessionId]);
    expect((await me(caller.accessToken)).statusCode).toBe(200);
  });

  it('403 also for another user\'s already revoked session', async () => {
    const user = await insertVerifiedUser(ctx);
    const other = await insertVerifiedUser(ctx);
    const caller = await signIn(ctx, { username: user.username, password: user.password });
    const foreign = await signIn(ctx, { username: other.username, password: other.password });
    expectNoContent(await withBearer(ctx, 'POST', '/auth/v0/logout', foreign.accessToken));
    expectError(await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${foreign.sessionId}`, caller.accessToken), 403, 'auth.session_forbidden');
  });

  it.each([
    ['an unknown UUID', randomUUID()],
    ['a non-UUID id', 'abc'],
    ['a UUID with a trailing character', `${randomUUID()}0`],
    ['a UUID in braces', `%7B${randomUUID()}%7D`],
    ['an SQL-looking id', "1'%20OR%20'1'='1"],
  ])('404 auth.session_not_found for %s, without Set-Cookie', async (_what, id) => {
    const user = await insertVerifiedUser(ctx);
    const caller = await signIn(ctx, { username: user.username, password: user.password });
    const res = await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${id}`, caller.accessToken);
    expectError(res, 404, 'auth.session_not_found');
    expect(res.headers['set-cookie']).toBeUndefined();
    expect((await me(caller.accessToken)).statusCode).toBe(200);
  });

  it('401 without a token, before looking at the id', async () => {
    expectError(await ctx.app.inject({ method: 'DELETE', url: `/auth/v0/sessions/${randomUUID()}` }), 401, 'auth.missing_access_token');
    expectError(await ctx.app.inject({ method: 'DELETE', url: '/auth/v0/sessions/abc' }), 401, 'auth.missing_access_token');
  });
});

describe('DELETE /auth/v0/sessions', () => {
  it('204 with the clearing cookie; every session of the user ends, other users are unaffected', async () => {
    const user = await insertVerifiedUser(ctx);
    const other = await insertVerifiedUser(ctx);
    const mine = [];
    for (let i = 0; i < 3; i++) mine.push(await signIn(ctx, { username: user.username, password: user.password }));
    const theirs = await signIn(ctx, { username: other.username, password: other.password });

    const res = await withBearer(ctx, 'DELETE', '/auth/v0/sessions', mine[0]!.accessToken);
    expectNoContent(res);
    expectClearingCookie(res);

    for (const s of mine) {
      expectError(await me(s.accessToken), 401, 'auth.invalid_access_token');
      expectError(await refresh(ctx, s.refreshToken), 401, 'auth.invalid_refresh_token');
    }
    expect((await me(theirs.accessToken)).statusCode).toBe(200);
    const r = await refresh(ctx, theirs.refreshToken);
    expect(r.statusCode).toBe(200);
    expect(r.json().session_id).toBe(theirs.sessionId);

    // The user can sign in again afterwards, with only the new session listed.
    const again = await signIn(ctx, { username: user.username, password: user.password });
    expect((await listSessions(again.accessToken)).map((s) => s.id)).toEqual([again.sessionId]);
  });

  it('401 without a token, and no cookie is cleared', async () => {
    const res = await ctx.app.inject({ method: 'DELETE', url: '/auth/v0/sessions' });
    expectError(res, 401, 'auth.missing_access_token');
    expect(res.headers['set-cookie']).toBeUndefined();
  });
});

describe('POST /auth/v0/logout', () => {
  it('204 with the clearing cookie; the session ends for both tokens; other sessions go on', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const sibling = await signIn(ctx, { username: user.username, password: user.password });

    const res = await withBearer(ctx, 'POST', '/auth/v0/logout', s.accessToken);
    expectNoContent(res);
    expectClearingCookie(res);

    expectError(await me(s.accessToken), 401, 'auth.invalid_access_token');
    expectError(await refresh(ctx, s.refreshToken), 401, 'auth.invalid_refresh_token');
    expect((await me(sibling.accessToken)).statusCode).toBe(200);
    expect((await listSessions(sibling.accessToken)).map((x) => x.id)).toEqual([sibling.sessionId]);
  });

  it('ends the session for a refresh token obtained by rotation too', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const rotated = await refresh(ctx, s.refreshToken);
    expect(rotated.statusCode).toBe(200);
    const newRefresh = setCookies(rotated).find((c) => c.name === 'refresh_token')!.value;
    const newAccess = rotated.json().tokens.access_token as string;
    expectNoContent(await withBearer(ctx, 'POST', '/auth/v0/logout', newAccess));
    expectError(await refresh(ctx, newRefresh), 401, 'auth.invalid_refresh_token');
    expectError(await me(s.accessToken), 401, 'auth.invalid_access_token');
  });

  it('401 without a token', async () => {
    const res = await ctx.app.inject({ method: 'POST', url: '/auth/v0/logout' });
    expectError(res, 401, 'auth.missing_access_token');
    expect(res.headers['set-cookie']).toBeUndefined();
  });
});

describe('POST /auth/v0/change-password', () => {
  it('204 with the clearing cookie; all sessions end; only the new password signs in', async () => {
    const user = await insertVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: user.password });
    const b = await signIn(ctx, { username: user.username, password: user.password });

    const res = await changePassword(a.accessToken, { current_password: user.password, new_password: NEW_PASSWORD });
    expectNoContent(res);
    expectClearingCookie(res);

    for (const s of [a, b]) {
      expectError(await me(s.accessToken), 401, 'auth.invalid_access_token');
      expectError(await refresh(ctx, s.refreshToken), 401, 'auth.invalid_refresh_token');
    }
    expectError(await trySignIn(user.username, user.password), 401, 'auth.invalid_credentials');
    const fresh = await signIn(ctx, { username: user.username, password: NEW_PASSWORD });
    expect((await me(fresh.accessToken)).statusCode).toBe(200);
  });

  it('401 auth.invalid_current_password for a wrong current password, and nothing changes', async () => {
    const user = await insertVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: user.password });
    const b = await signIn(ctx, { username: user.username, password: user.password });

    const res = await changePassword(a.accessToken, { current_password: `${user.password}!`, new_password: NEW_PASSWORD });
    expectError(res, 401, 'auth.invalid_current_password');
    expect(res.headers['set-cookie']).toBeUndefined();

    expect((await me(a.accessToken)).statusCode).toBe(200);
    expect((await me(b.accessToken)).statusCode).toBe(200);
    expect((await listSessions(a.accessToken)).map((s) => s.id).sort()).toEqual([a.sessionId, b.sessionId].sort());
    expect((await refresh(ctx, b.refreshToken)).statusCode).toBe(200);
    expectError(await trySignIn(user.username, NEW_PASSWORD), 401, 'auth.invalid_credentials');
    expect((await trySignIn(user.username, user.password)).statusCode).toBe(200);
  });

  it.each([
    ['a short new_password', (p: string) => ({ current_password: p, new_password: 'short' })],
    ['a new_password of 73 characters', (p: string) => ({ current_password: p, new_password: 'x'.repeat(73) })],
    ['an unknown member', (p: string) => ({ current_password: p, new_password: NEW_PASSWORD, extra: true })],
    ['a missing current_password', (_p: string) => ({ new_password: NEW_PASSWORD })],
    ['a missing new_password', (p: string) => ({ current_password: p })],
    ['a number as new_password', (p: string) => ({ current_password: p, new_password: 123456789 })],
    ['an array body', (p: string) => [p, NEW_PASSWORD]],
  ])('400 auth.change_password.validation_failed for %s, and nothing changes', async (_what, makeBody) => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const res = await changePassword(s.accessToken, makeBody(user.password));
    expectError(res, 400, 'auth.change_password.validation_failed');
    expect(res.headers['set-cookie']).toBeUndefined();
    expect((await me(s.accessToken)).statusCode).toBe(200);
    expect((await trySignIn(user.username, user.password)).statusCode).toBe(200);
  });

  it('400 auth.change_password.validation_failed for malformed JSON, a non-JSON content type and an empty body', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const send = (headers: Record<string, string>, payload?: string) =>
      ctx.app.inject({ method: 'POST', url: '/auth/v0/change-password', headers: { authorization: `Bearer ${s.accessToken}`, ...headers }, ...(payload === undefined ? {} : { payload }) });
    expectError(await send({ 'content-type': 'application/json' }, '{"current_password":'), 400, 'auth.change_password.validation_failed');
    expectError(await send({ 'content-type': 'text/plain' }, JSON.stringify({ current_password: user.password, new_password: NEW_PASSWORD })), 400, 'auth.change_password.validation_failed');
    expectError(await send({ 'content-type': 'application/json' }), 400, 'auth.change_password.validation_failed');
    expectError(await send({}), 400, 'auth.change_password.validation_failed');
    expect((await trySignIn(user.username, user.password)).statusCode).toBe(200);
  });

  it('401 without a token, even with a bad body', async () => {
    const noToken = (headers: Record<string, string>, payload: string) => ctx.app.inject({ method: 'POST', url: '/auth/v0/change-password', headers, payload });
    expectError(await noToken({ 'content-type': 'application/json' }, JSON.stringify({ new_password: 'short' })), 401, 'auth.missing_access_token');
    expectError(await noToken({ 'content-type': 'application/json' }, '{not json'), 401, 'auth.missing_access_token');
    expectError(await noToken({ 'content-type': 'text/plain' }, 'hello'), 401, 'auth.missing_access_token');
    expectError(await noToken({ 'content-type': 'application/json', authorization: 'Bearer nope' }, '{}'), 401, 'auth.invalid_access_token');
  });

  it('two parallel changes: exactly one 204, the other 401, and only the winner\'s new password works', async () => {
    const user = await insertVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: user.password });
    const b = await signIn(ctx, { username: user.username, password: user.password });
    const passwords = ['first new passphrase 1', 'second new passphrase 2'];
    const results = await Promise.all([
      changePassword(a.accessToken, { current_password: user.password, new_password: passwords[0] }),
      changePassword(b.accessToken, { current_password: user.password, new_password: passwords[1] }),
    ]);
    expect(results.map((r) => r.statusCode).sort()).toEqual([204, 401]);
    const winner = results.findIndex((r) => r.statusCode === 204);
    const loser = 1 - winner;
    expectClearingCookie(results[winner]!);
    expect(['auth.invalid_current_password', 'auth.invalid_access_token']).toContain(results[loser]!.json().code);
    expect(keysOf(results[loser]!.json())).toEqual(['code', 'message']);

    expect((await trySignIn(user.username, passwords[winner]!)).statusCode).toBe(200);
    expectError(await trySignIn(user.username, passwords[loser]!), 401, 'auth.invalid_credentials');
    expectError(await trySignIn(user.username, user.password), 401, 'auth.invalid_credentials');
    for (const s of [a, b]) expectError(await me(s.accessToken), 401, 'auth.invalid_access_token');
  });
});

describe('Bearer routes with a revoked session', () => {
  it('every Bearer route answers 401 auth.invalid_access_token with exactly {code, message}', async () => {
    const user = await insertVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const keep = await signIn(ctx, { username: user.username, password: user.password });
    expectNoContent(await withBearer(ctx, 'POST', '/auth/v0/logout', s.accessToken));

    const attempts = [
      withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken),
      withBearer(ctx, 'GET', '/auth/v0/sessions', s.accessToken),
      withBearer(ctx, 'DELETE', '/auth/v0/sessions', s.accessToken),
      withBearer(ctx, 'DELETE', `/auth/v0/sessions/${keep.sessionId}`, s.accessToken),
      withBearer(ctx, 'DELETE', `/auth/v0/sessions/${s.sessionId}`, s.accessToken),
      withBearer(ctx, 'POST', '/auth/v0/logout', s.accessToken),
      withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: NEW_PASSWORD }),
    ];
    for (const res of await Promise.all(attempts)) {
      expectError(res, 401, 'auth.invalid_access_token');
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    // None of them did anything: the other session lives, the password is unchanged.
    expect((await me(keep.accessToken)).statusCode).toBe(200);
    expect((await listSessions(keep.accessToken)).map((x) => x.id)).toEqual([keep.sessionId]);
    expect((await trySignIn(user.username, user.password)).statusCode).toBe(200);
  });
});

describe('sign-in racing change-password', () => {
  it('no session signed in with the old password survives the change', async () => {
    const user = await insertVerifiedUser(ctx);
    const first = await signIn(ctx, { username: user.username, password: user.password });
    const newPassword = 'a brand new password 42';
    const [change, ...signIns] = await Promise.all([
      withBearer(ctx, 'POST', '/auth/v0/change-password', first.accessToken, { current_password: user.password, new_password: newPassword }),
      ...Array.from({ length: 6 }, () => postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: user.password })),
    ]);
    expect(change!.statusCode).toBe(204);
    for (const res of signIns) {
      if (res.statusCode !== 200) {
        expect(res.statusCode).toBe(401);
        continue;
      }
      // A sign-in that won the race committed before the change, so the change revoked it.
      const me = await withBearer(ctx, 'GET', '/auth/v0/me', res.json().tokens.access_token);
      expect(me.statusCode).toBe(401);
    }
    const { rows } = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1 AND revoked_at IS NULL', [user.id]);
    expect(rows[0]!.n).toBe(0);
  });
});

describe('ids of sessions, devices and refresh tokens are time-ordered (UUID version 7, RFC 9562)', () => {
  /** Version nibble 7, variant bits 10. */
  const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const timeOf = (id: string): number => parseInt(id.replace(/-/g, '').slice(0, 12), 16);

  it('a sign-in and a refresh make ids whose first 48 bits are the time they were made, the newer token\'s sorting after the older', async () => {
    const user = await insertVerifiedUser(ctx);
    const before = Date.now();
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const rotated = await refresh(ctx, s.refreshToken);
    const after = Date.now();
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect(s.sessionId).toMatch(UUID_V7);
    expect(timeOf(s.sessionId)).toBeGreaterThanOrEqual(before);
    expect(timeOf(s.sessionId)).toBeLessThanOrEqual(after);
    const listed = await withBearer(ctx, 'GET', '/auth/v0/sessions', s.accessToken);
    const deviceId = (listed.json() as { sessions: WireSession[] }).sessions.find((x) => x.id === s.sessionId)!.device_id!;
    expect(deviceId).toMatch(UUID_V7);
    const { rows } = await ctx.db.query<{ id: string; parent_id: string | null }>('SELECT id::text, parent_id::text FROM refresh_tokens WHERE session_id = $1', [s.sessionId]);
    expect(rows).toHaveLength(2);
    const first = rows.find((r) => r.parent_id === null)!;
    const second = rows.find((r) => r.parent_id === first.id)!;
    for (const id of [first.id, second.id]) {
      expect(id).toMatch(UUID_V7);
      expect(timeOf(id)).toBeGreaterThanOrEqual(before);
      expect(timeOf(id)).toBeLessThanOrEqual(after);
    }
    expect(first.id < second.id || timeOf(first.id) === timeOf(second.id)).toBe(true);
  });
});
