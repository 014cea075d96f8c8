import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../../src/crypto/secrets.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, refresh, refreshCookieOf, signIn, withBearer } from '../helpers/flows.js';

/**
 * Retention through the service (docs/operations.md, "Retention"): the sealed successors of
 * the refresh grace window are erased once the window has passed, which leaves a presented
 * parent plain reuse; ended sessions go with their tokens and devices after their period.
 */

/** The grace window of this file, in seconds. */
const GRACE = 10;
/** A session lifetime beyond the session retention, so that a session signed in after a purge is still live. */
const SESSION_TTL = 90 * 24 * 3600;
const RETENTION_SESSIONS_DAYS = 30;
const DAY = 24 * 3600;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({
    REFRESH_REUSE_GRACE_SECONDS: String(GRACE),
    SESSION_TTL_SECONDS: String(SESSION_TTL),
    RETENTION_SESSIONS_DAYS: String(RETENTION_SESSIONS_DAYS),
  });
});
afterAll(async () => ctx?.close());

function expectError(res: LightMyRequestResponse, code: string): void {
  expect(res.statusCode, res.body).toBe(401);
  expect(res.json()).toEqual({ code, message: expect.any(String) });
}

async function ciphertextOf(token: string): Promise<string | null | undefined> {
  const { rows } = await ctx.db.query<{ successor_ciphertext: string | null }>('SELECT successor_ciphertext FROM refresh_tokens WHERE token_hash = $1', [sha256(token)]);
  return rows[0]?.successor_ciphertext;
}

describe('sealed successors (REFRESH_REUSE_GRACE_SECONDS=10)', () => {
  it('within the window the seal stays and the parent gets the live token back; after it the seal is erased and the parent is plain reuse', async () => {
    const user = await createVerifiedUser(ctx);
    const { refreshToken: t1, sessionId } = await signIn(ctx, { username: user.username, password: user.password });
    const rotated = await refresh(ctx, t1);
    expect(rotated.statusCode, rotated.body).toBe(200);
    const t2 = refreshCookieOf(rotated).value;

    // Within the window: the erasure leaves the seal, and the grace case works.
    ctx.clock.advance(GRACE / 2);
    await ctx.app.retention.eraseSealedSuccessors();
    expect(await ciphertextOf(t1)).not.toBeNull();
    const replay = await refresh(ctx, t1);
    expect(replay.statusCode, replay.body).toBe(200);
    expect(refreshCookieOf(replay).value).toBe(t2);

    // After the window: the job erases every seal older than the window.
    ctx.clock.advance(GRACE / 2 + 1);
    expect(await ctx.app.retention.eraseSealedSuccessors()).toBeGreaterThanOrEqual(1);
    expect(await ciphertextOf(t1)).toBeNull();
    const { rows } = await ctx.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM refresh_tokens WHERE successor_ciphertext IS NOT NULL AND rotated_at < $1::timestamptz - make_interval(secs => $2)`,
      [ctx.clock.now(), GRACE],
    );
    expect(rows[0]!.n).toBe(0);

    // Presenting the parent now is reuse, as it was with the seal: the family is revoked.
    expectError(await refresh(ctx, t1), 'auth.refresh_token_reused');
    const { rows: session } = await ctx.db.query<{ revoked_reason: string | null }>('SELECT revoked_reason FROM sessions WHERE id = $1', [sessionId]);
    expect(session[0]!.revoked_reason).toBe('refresh_token_reuse');
    expectError(await refresh(ctx, t2), 'auth.invalid_refresh_token');
  });
});

describe('sessions (RETENTION_SESSIONS_DAYS=30)', () => {
  it('a session logged out over 30 days ago is deleted with its tokens and device; its token is then unknown, not reuse; a live session stays', async () => {
    const user = await createVerifiedUser(ctx);
    const old = await signIn(ctx, { username: user.username, password: user.password });
    const rotated = await refresh(ctx, old.refreshToken);
    expect(rotated.statusCode, rotated.body).toBe(200);
    const live = refreshCookieOf(rotated).value;
    const logout = await withBearer(ctx, 'POST', '/auth/v0/logout', rotated.json().tokens.access_token as string);
    expect(logout.statusCode, logout.body).toBe(204);
    const { rows: before } = await ctx.db.query<{ device_id: string }>('SELECT device_id FROM sessions WHERE id = $1', [old.sessionId]);
    const deviceId = before[0]!.device_id;

    // Within the retention the ended session is kept (its tokens still tell reuse apart).
    ctx.clock.advance((RETENTION_SESSIONS_DAYS - 1) * DAY);
    await ctx.app.retention.runOnce();
    expect((await ctx.db.query('SELECT 1 FROM sessions WHERE id = $1', [old.sessionId])).rows).toHaveLength(1);

    ctx.clock.advance(2 * DAY);
    const current = await signIn(ctx, { username: user.username, password: user.password });
    const report = await ctx.app.retention.runOnce();
    expect(report.sessions).toBeGreaterThanOrEqual(1);
    expect((await ctx.db.query('SELECT 1 FROM sessions WHERE id = $1', [old.sessionId])).rows).toHaveLength(0);
    expect((await ctx.db.query('SELECT 1 FROM refresh_tokens WHERE session_id = $1', [old.sessionId])).rows).toHaveLength(0);
    expect((await ctx.db.query('SELECT 1 FROM devices WHERE id = $1', [deviceId])).rows).toHaveLength(0);

    // A token of the deleted session is unknown; the live session is untouched.
    expectError(await refresh(ctx, old.refreshToken), 'auth.invalid_refresh_token');
    expectError(await refresh(ctx, live), 'auth.invalid_refresh_token');
    const sessions = await withBearer(ctx, 'GET', '/auth/v0/sessions', current.accessToken);
    expect(sessions.statusCode, sessions.body).toBe(200);
    expect(JSON.stringify(sessions.json())).toContain(current.sessionId);
    expect((await refresh(ctx, current.refreshToken)).statusCode).toBe(200);
  });
});

describe('GET /metrics', () => {
  it('auth_outbox_emails reports pending and dead rows only (sent and cancelled rows are not counted at scrape time)', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(/^auth_outbox_emails\{status="pending"\} \d+$/m);
    expect(res.body).toMatch(/^auth_outbox_emails\{status="dead"\} \d+$/m);
    expect(res.body).not.toMatch(/^auth_outbox_emails\{status="(sent|cancelled)"\}/m);
  });
});
