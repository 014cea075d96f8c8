import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../../src/crypto/secrets.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, postJson, refresh, refreshCookieOf, signIn, withBearer } from '../helpers/flows.js';

/**
 * Concurrency, through the same buildApp as production, on PGlite and on
 * PostgreSQL. Already covered elsewhere and not repeated here: 50 parallel wrong codes and the
 * right code twice in parallel (test/http/verify-email.test.ts), two parallel password changes
 * and sign-in racing a password change (test/http/sessions.test.ts), 10 parallel refreshes
 * (test/http/sign-in-refresh.test.ts). Here: 20 parallel refreshes with one token (strict and
 * with a grace window), and refresh racing logout, revoke-one, revoke-all and change-password.
 * "No token survives" means: every refresh token and access token that any racing request
 * handed out is refused afterwards.
 */

/** Parallel requests with one refresh token. */
const PARALLEL_REFRESHES = 20;
/**
 * Times each race is run: the refresh lands before, during or after the revocation, differently
 * from round to round on PostgreSQL. One refresh per token and round: a second one with the same
 * token would be reuse, which revokes the session by itself and hides the race.
 */
const ROUNDS = 10;
/** Grace window for the grace test: far longer than the test. */
const GRACE_SECONDS = 10;

let ctx: TestContext;
let grace: TestContext;
beforeAll(async () => {
  [ctx, grace] = await Promise.all([createTestContext(), createTestContext({ REFRESH_REUSE_GRACE_SECONDS: String(GRACE_SECONDS) })]);
});
afterAll(async () => {
  await ctx?.close();
  await grace?.close();
});

async function liveTokenHashes(c: TestContext, sessionId: string): Promise<string[]> {
  const { rows } = await c.db.query<{ token_hash: string }>('SELECT token_hash FROM refresh_tokens WHERE session_id = $1 AND rotated_at IS NULL', [sessionId]);
  return rows.map((r) => r.token_hash);
}

async function isRevoked(c: TestContext, sessionId: string): Promise<boolean> {
  const { rows } = await c.db.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM sessions WHERE id = $1', [sessionId]);
  return rows[0]!.revoked_at !== null;
}

/**
 * Asserts that nothing the racing refreshes handed out still works: each 200's refresh token
 * and access token are refused, and so is the token they all presented.
 */
async function expectNoTokenSurvives(c: TestContext, presented: string, refreshes: LightMyRequestResponse[], accessTokens: string[]): Promise<void> {
  for (const r of refreshes) {
    if (r.statusCode === 200) {
      expect((await refresh(c, refreshCookieOf(r).value)).statusCode).toBe(401);
      expect((await withBearer(c, 'GET', '/auth/v0/me', r.json().tokens.access_token)).statusCode).toBe(401);
    } else {
      expect(r.statusCode, r.body).toBe(401);
    }
  }
  expect((await refresh(c, presented)).statusCode).toBe(401);
  for (const token of accessTokens) expect((await withBearer(c, 'GET', '/auth/v0/me', token)).statusCode).toBe(401);
}

describe(`${PARALLEL_REFRESHES} parallel refreshes with one token`, () => {
  it('strict (REFRESH_REUSE_GRACE_SECONDS=0): at most one 200, the rest 401; never a second live token', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const results = await Promise.all(Array.from({ length: PARALLEL_REFRESHES }, () => refresh(ctx, s.refreshToken)));
    const ok = results.filter((r) => r.statusCode === 200);
    expect(ok.length).toBeLessThanOrEqual(1);
    for (const r of results.filter((x) => x.statusCode !== 200)) {
      expect(r.statusCode).toBe(401);
      expect(['auth.refresh_token_reused', 'auth.invalid_refresh_token']).toContain(r.json().code);
    }
    expect((await liveTokenHashes(ctx, s.sessionId)).length).toBeLessThanOrEqual(1);
    // The losers presented a rotated token: reuse, so the family is revoked and the winner's token is dead too.
    if (ok.length === 1) {
      expect(await isRevoked(ctx, s.sessionId)).toBe(true);
      expect((await refresh(ctx, refreshCookieOf(ok[0]!).value)).statusCode).toBe(401);
    }
  });

  it(`with a grace window: all ${PARALLEL_REFRESHES} answer 200 with the same new token; exactly one live token; the session lives`, async () => {
    const user = await createVerifiedUser(grace);
    const s = await signIn(grace, { username: user.username, password: user.password });
    const results = await Promise.all(Array.from({ length: PARALLEL_REFRESHES }, () => refresh(grace, s.refreshToken)));
    for (const r of results) expect(r.statusCode, r.body).toBe(200);
    const issued = new Set(results.map((r) => refreshCookieOf(r).value));
    expect(issued.size).toBe(1);
    const [next] = [...issued];
    expect(await liveTokenHashes(grace, s.sessionId)).toEqual([sha256(next!)]);
    expect(await isRevoked(grace, s.sessionId)).toBe(false);
    expect((await refresh(grace, next!)).statusCode).toBe(200);
  });
});

describe('refresh racing a revocation: no token survives', () => {
  it('refresh racing logout', async () => {
    const user = await createVerifiedUser(ctx);
    for (let round = 0; round < ROUNDS; round++) {
      const s = await signIn(ctx, { username: user.username, password: user.password });
      const [logout, ...refreshes] = await Promise.all([withBearer(ctx, 'POST', '/auth/v0/logout', s.accessToken), refresh(ctx, s.refreshToken)]);
      // The logout checked the session first or after a refresh: either way it ends the family.
      expect(logout!.statusCode, logout!.body).toBe(204);
      expect(await isRevoked(ctx, s.sessionId)).toBe(true);
      await expectNoTokenSurvives(ctx, s.refreshToken, refreshes, [s.accessToken]);
    }
  });

  it('refresh racing DELETE /sessions/{id} from another session of the same user', async () => {
    const user = await createVerifiedUser(ctx);
    const revoker = await signIn(ctx, { username: user.username, password: user.password });
    for (let round = 0; round < ROUNDS; round++) {
      const s = await signIn(ctx, { username: user.username, password: user.password });
      const [revoke, ...refreshes] = await Promise.all([
        withBearer(ctx, 'DELETE', `/auth/v0/sessions/${s.sessionId}`, revoker.accessToken),
        refresh(ctx, s.refreshToken),
      ]);
      expect(revoke!.statusCode, revoke!.body).toBe(204);
      expect(await isRevoked(ctx, s.sessionId)).toBe(true);
      await expectNoTokenSurvives(ctx, s.refreshToken, refreshes, [s.accessToken]);
    }
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', revoker.accessToken)).statusCode).toBe(200);
  });

  it('refreshes of three sessions racing DELETE /sessions (revoke all)', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const user = await createVerifiedUser(ctx);
      const sessions = await Promise.all(Array.from({ length: 3 }, () => signIn(ctx, { username: user.username, password: user.password })));
      const [revokeAll, ...refreshes] = await Promise.all([
        withBearer(ctx, 'DELETE', '/auth/v0/sessions', sessions[0]!.accessToken),
        ...sessions.map((s) => refresh(ctx, s.refreshToken)),
      ]);
      expect(revokeAll!.statusCode, revokeAll!.body).toBe(204);
      for (const s of sessions) expect(await isRevoked(ctx, s.sessionId)).toBe(true);
      for (const [i, s] of sessions.entries()) {
        await expectNoTokenSurvives(ctx, s.refreshToken, [refreshes[i]!], sessions.map((x) => x.accessToken));
      }
    }
  });

  it('refreshes racing several parallel password changes: exactly one change wins and every session ends', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const user = await createVerifiedUser(ctx);
      const sessions = await Promise.all(Array.from({ length: 3 }, () => signIn(ctx, { username: user.username, password: user.password })));
      const newPasswords = sessions.map((_, i) => `new passphrase number ${i} for round ${round}`);
      const results = await Promise.all([
        ...sessions.map((s, i) => withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: newPasswords[i] })),
        ...sessions.map((s) => refresh(ctx, s.refreshToken)),
      ]);
      const changes = results.slice(0, sessions.length);
      const refreshes = results.slice(sessions.length);
      expect(changes.filter((r) => r.statusCode === 204)).toHaveLength(1);
      for (const r of changes.filter((x) => x.statusCode !== 204)) {
        expect(r.statusCode).toBe(401);
        expect(['auth.invalid_current_password', 'auth.invalid_access_token']).toContain(r.json().code);
      }
      for (const s of sessions) expect(await isRevoked(ctx, s.sessionId)).toBe(true);
      for (const [i, s] of sessions.entries()) {
        await expectNoTokenSurvives(ctx, s.refreshToken, [refreshes[i]!], sessions.map((x) => x.accessToken));
      }
      // Only the winner's password signs in now.
      const winner = changes.findIndex((r) => r.statusCode === 204);
      expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: newPasswords[winner] })).statusCode).toBe(200);
      expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: user.password })).statusCode).toBe(401);
    }
  });
});
