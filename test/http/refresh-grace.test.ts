import { createHash } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { newRefreshToken } from '../../src/crypto/refresh-token.js';
import { sha256 } from '../../src/crypto/secrets.js';
import { openSuccessor, sealSuccessor } from '../../src/crypto/successor-seal.js';
import { isWithinGraceWindow } from '../../src/modules/sessions/refresh-grace.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, refresh, refreshCookieOf, signIn, withBearer } from '../helpers/flows.js';

/**
 * Refresh grace window (docs/api.md#reuse-grace-window): with REFRESH_REUSE_GRACE_SECONDS > 0
 * the live token's immediate parent, presented within the window, gets the live token back;
 * an older token, or the parent after the window, is reuse. With 0 the strict rule stays.
 */

/** The window these tests configure, in seconds. */
const GRACE = 10;
/** Parallel refreshes with one token: two tabs, and then some. */
const PARALLEL = 8;
/** SESSION_TTL_SECONDS default. */
const SESSION_TTL = 2_592_000;

let grace: TestContext;
let strict: TestContext;
beforeAll(async () => {
  [grace, strict] = await Promise.all([createTestContext({ REFRESH_REUSE_GRACE_SECONDS: String(GRACE) }), createTestContext()]);
});
afterAll(async () => {
  await Promise.all([grace?.close(), strict?.close()]);
});

/** A verified user signed in once: the first refresh token (T1) of a fresh family. */
async function startFamily(ctx: TestContext) {
  const user = await createVerifiedUser(ctx);
  const s = await signIn(ctx, { username: user.username, password: user.password });
  return { user, sessionId: s.sessionId, t1: s.refreshToken };
}

/** Refreshes and expects 200; returns the new cookie value and access token. */
async function rotate(ctx: TestContext, token: string): Promise<{ token: string; accessToken: string; res: LightMyRequestResponse }> {
  const res = await refresh(ctx, token);
  expect(res.statusCode, res.body).toBe(200);
  return { token: refreshCookieOf(res).value, accessToken: res.json().tokens.access_token as string, res };
}

function expectError(res: LightMyRequestResponse, code: string): void {
  expect(res.statusCode, res.body).toBe(401);
  expect(res.json()).toEqual({ code, message: expect.any(String) });
}

/** Hashes of the live (unrotated) tokens of a family. */
async function liveHashes(ctx: TestContext, sessionId: string): Promise<string[]> {
  const { rows } = await ctx.db.query<{ token_hash: string }>('SELECT token_hash FROM refresh_tokens WHERE session_id = $1 AND rotated_at IS NULL', [sessionId]);
  return rows.map((r) => r.token_hash);
}

async function sessionRevokedAt(ctx: TestContext, sessionId: string): Promise<Date | null> {
  const { rows } = await ctx.db.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM sessions WHERE id = $1', [sessionId]);
  return rows[0]!.revoked_at;
}

/** The stored row of one token, found by its hash. */
async function tokenRow(ctx: TestContext, token: string) {
  const { rows } = await ctx.db.query<{ rotated_at: Date | null; successor_ciphertext: string | null }>(
    'SELECT rotated_at, successor_ciphertext FROM refresh_tokens WHERE token_hash = $1',
    [sha256(token)],
  );
  return rows[0]!;
}

/** Asserts reuse: 401 auth.refresh_token_reused, the family revoked, its live token dead, the warning logged. */
async function expectReuse(ctx: TestContext, res: LightMyRequestResponse, family: { sessionId: string; live: string }): Promise<void> {
  expectError(res, 'auth.refresh_token_reused');
  expect(await sessionRevokedAt(ctx, family.sessionId)).not.toBeNull();
  expectError(await refresh(ctx, family.live), 'auth.invalid_refresh_token');
  expect(ctx.logs.some((l) => l.event === 'refresh_token.reused' && l.sessionId === family.sessionId && l.level === 40)).toBe(true);
}

describe('refresh grace window (REFRESH_REUSE_GRACE_SECONDS=10)', () => {
  it('(a) parallel refreshes with one token all answer 200 with the same new cookie; one live token remains', async () => {
    const { sessionId, t1 } = await startFamily(grace);
    const results = await Promise.all(Array.from({ length: PARALLEL }, () => refresh(grace, t1)));
    for (const r of results) expect(r.statusCode, r.body).toBe(200);
    const cookies = results.map((r) => refreshCookieOf(r));
    const t2 = cookies[0]!.value;
    expect(t2).not.toBe(t1);
    for (const c of cookies) {
      expect(c.value).toBe(t2);
      expect(c.attributes['max-age']).toBe(String(SESSION_TTL));
    }
    for (const r of results) expect(r.json().session_id).toBe(sessionId);
    expect(await liveHashes(grace, sessionId)).toEqual([sha256(t2)]);
    const { rows } = await grace.db.query('SELECT 1 FROM refresh_tokens WHERE session_id = $1', [sessionId]);
    expect(rows).toHaveLength(2);
    expect(await sessionRevokedAt(grace, sessionId)).toBeNull();
    // Every tab's access token works, and the shared token rotates on.
    for (const r of results) expect((await withBearer(grace, 'GET', '/auth/v0/me', r.json().tokens.access_token)).statusCode).toBe(200);
    await rotate(grace, t2);
  });

  it('(b) the parent presented again within the window gets the current live token back; the session stays active', async () => {
    const { sessionId, t1 } = await startFamily(grace);
    const { token: t2 } = await rotate(grace, t1);
    const rotatedAt = (await tokenRow(grace, t1)).rotated_at;
    grace.clock.advance(GRACE / 2);

    const again = await rotate(grace, t1);
    expect(again.token).toBe(t2);
    expect(again.res.json().session_id).toBe(sessionId);
    expect(refreshCookieOf(again.res).attributes['max-age']).toBe(String(SESSION_TTL - GRACE / 2));
    expect((await withBearer(grace, 'GET', '/auth/v0/me', again.accessToken)).statusCode).toBe(200);
    expect(await sessionRevokedAt(grace, sessionId)).toBeNull();
    expect(await liveHashes(grace, sessionId)).toEqual([sha256(t2)]);
    // Answering the parent does not touch its rotation time.
    expect((await tokenRow(grace, t1)).rotated_at).toEqual(rotatedAt);
    expect(grace.logs.some((l) => l.event === 'refresh_token_grace_replay' && l.sessionId === sessionId)).toBe(true);

    // The live token still rotates normally.
    const { token: t3 } = await rotate(grace, t2);
    expect(t3).not.toBe(t2);
    expect(await liveHashes(grace, sessionId)).toEqual([sha256(t3)]);
  });

  it('(c) the grandparent within the window is reuse: 401 auth.refresh_token_reused and the session is revoked', async () => {
    const { sessionId, t1 } = await startFamily(grace);
    const { token: t2 } = await rotate(grace, t1);
    const { token: t3 } = await rotate(grace, t2);
    grace.clock.advance(1);
    await expectReuse(grace, await refresh(grace, t1), { sessionId, live: t3 });
    // Once revoked, even the parent within its window gets nothing.
    expectError(await refresh(grace, t2), 'auth.refresh_token_reused');
  });

  it('(d) the parent after the window is reuse; the window runs from the rotation and is not extended by answering the parent', async () => {
    const late = await startFamily(grace);
    const { token: live } = await rotate(grace, late.t1);
    grace.clock.advance(GRACE + 1);
    await expectReuse(grace, await refresh(grace, late.t1), { sessionId: late.sessionId, live });

    // Inclusive end: at exactly GRACE seconds the parent is still answered; one second later not,
    // although it was answered in between.
    const edge = await startFamily(grace);
    const { token: edgeLive } = await rotate(grace, edge.t1);
    grace.clock.advance(GRACE / 2);
    expect((await rotate(grace, edge.t1)).token).toBe(edgeLive);
    grace.clock.advance(GRACE / 2);
    expect((await rotate(grace, edge.t1)).token).toBe(edgeLive);
    grace.clock.advance(1);
    await expectReuse(grace, await refresh(grace, edge.t1), { sessionId: edge.sessionId, live: edgeLive });
  });

  it('the parent within the window gets nothing once the session is logged out or expired', async () => {
    const out = await startFamily(grace);
    const { token: live, accessToken } = await rotate(grace, out.t1);
    expect((await withBearer(grace, 'POST', '/auth/v0/logout', accessToken)).statusCode).toBe(204);
    expect((await refresh(grace, out.t1)).statusCode).toBe(401);
    expectError(await refresh(grace, live), 'auth.invalid_refresh_token');

    const old = await startFamily(grace);
    grace.clock.advance(SESSION_TTL - GRACE / 2);
    const { token: oldLive } = await rotate(grace, old.t1);
    grace.clock.advance(GRACE / 2);
    expect((await refresh(grace, old.t1)).statusCode).toBe(401);
    expectError(await refresh(grace, oldLive), 'auth.invalid_refresh_token');
  });

  it('(f) the database holds no usable successor: no plaintext or hash in successor_ciphertext; a wrong token cannot open it', async () => {
    const { sessionId, t1 } = await startFamily(grace);
    const { token: t2 } = await rotate(grace, t1);
    const parent = await tokenRow(grace, t1);
    const sealed = parent.successor_ciphertext;
    expect(sealed).not.toBeNull();
    const forms = [t2, sha256(t2), createHash('sha256').update(t2).digest('hex'), Buffer.from(t2, 'base64url').toString('hex')];
    for (const form of forms) expect(sealed).not.toContain(form);
    // Nowhere in the family's rows does the live token appear in clear.
    const { rows } = await grace.db.query<{ j: string }>('SELECT row_to_json(rt)::text AS j FROM refresh_tokens rt WHERE session_id = $1', [sessionId]);
    for (const { j } of rows) {
      expect(j).not.toContain(t2);
      expect(j).not.toContain(t1);
    }
    // The live token itself carries nothing sealed.
    expect((await tokenRow(grace, t2)).successor_ciphertext).toBeNull();

    // Only the parent opens it; any other token, or altered data, gives nothing.
    expect(openSuccessor(t1, sealed!)).toBe(t2);
    expect(openSuccessor(t2, sealed!)).toBeUndefined();
    expect(openSuccessor(newRefreshToken().token, sealed!)).toBeUndefined();
    const raw = Buffer.from(sealed!, 'base64url');
    raw[raw.length - 1] = raw[raw.length - 1]! ^ 1;
    expect(openSuccessor(t1, raw.toString('base64url'))).toBeUndefined();
    expect(openSuccessor(t1, 'garbage')).toBeUndefined();
    // A fresh nonce each time: sealing twice never gives the same value.
    expect(sealSuccessor(t1, t2)).not.toBe(sealSuccessor(t1, t2));

    for (const line of grace.rawLogs) {
      expect(line).not.toContain(t1);
      expect(line).not.toContain(t2);
    }
  });
});

describe('REFRESH_REUSE_GRACE_SECONDS=0 stays strict', () => {
  it('(e) parallel refreshes with one token give at most one 200', async () => {
    const { sessionId, t1 } = await startFamily(strict);
    const results = await Promise.all(Array.from({ length: PARALLEL }, () => refresh(strict, t1)));
    expect(results.filter((r) => r.statusCode === 200).length).toBeLessThanOrEqual(1);
    for (const r of results.filter((x) => x.statusCode !== 200)) {
      expect(r.statusCode).toBe(401);
      expect(['auth.refresh_token_reused', 'auth.invalid_refresh_token']).toContain(r.json().code);
    }
    expect((await liveHashes(strict, sessionId)).length).toBeLessThanOrEqual(1);
  });

  it('the parent presented again at once is reuse, and nothing is sealed', async () => {
    const { sessionId, t1 } = await startFamily(strict);
    const { token: t2 } = await rotate(strict, t1);
    expect((await tokenRow(strict, t1)).successor_ciphertext).toBeNull();
    await expectReuse(strict, await refresh(strict, t1), { sessionId, live: t2 });
  });
});

describe('isWithinGraceWindow', () => {
  it('is inclusive at the end, off at 0, and tolerates a rotation time slightly ahead (instance clocks apart)', () => {
    const rotatedAt = new Date('2030-01-01T00:00:00Z');
    const at = (ms: number) => new Date(rotatedAt.getTime() + ms);
    expect(isWithinGraceWindow(rotatedAt, at(0), GRACE)).toBe(true);
    expect(isWithinGraceWindow(rotatedAt, at(GRACE * 1000), GRACE)).toBe(true);
    expect(isWithinGraceWindow(rotatedAt, at(GRACE * 1000 + 1), GRACE)).toBe(false);
    expect(isWithinGraceWindow(rotatedAt, at(-50), GRACE)).toBe(true);
    expect(isWithinGraceWindow(rotatedAt, at(0), 0)).toBe(false);
  });
});

describe('(g) REFRESH_REUSE_GRACE_SECONDS configuration', () => {
  it('defaults to 0 and accepts 0 to 300', () => {
    expect(loadConfig({}).refreshReuseGraceSeconds).toBe(0);
    for (const v of [0, 1, 10, 300]) expect(loadConfig({ REFRESH_REUSE_GRACE_SECONDS: String(v) }).refreshReuseGraceSeconds).toBe(v);
  });

  it.each(['301', '-1', '1.5', 'ten'])('refuses %s at start, naming the setting', (value) => {
    let error: unknown;
    try {
      loadConfig({ REFRESH_REUSE_GRACE_SECONDS: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([expect.stringContaining('REFRESH_REUSE_GRACE_SECONDS')]);
  });
});
