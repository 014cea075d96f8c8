import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, refresh, refreshCookieOf, signIn, withBearer } from '../helpers/flows.js';

/**
 * Lock order of delete-account against a refresh (PostgreSQL only: PGlite has one connection,
 * so its transactions never interleave). A refresh locks its token, then the token's session;
 * the deletion must take the user's tokens before their sessions too, or a refresh holding a
 * token and waiting for the session deadlocks with a deletion holding the session and waiting
 * for that token.
 */

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({}, { startOutboxWorker: false });
});
afterAll(async () => ctx?.close());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `n` backends of this database wait for a lock. */
async function untilWaiting(probe: pg.Client, n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await probe.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (rows[0]!.n >= n) return;
    await sleep(25);
  }
  throw new Error(`fewer than ${n} backends wait for a lock`);
}

describe('delete-account while a refresh of the same session is under way', () => {
  it.runIf(process.env.TEST_DB === 'postgres')('a refresh holding its token and waiting for the session, and the deletion, both finish without a deadlock, a 500 or a 503', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const first = s.refreshToken;
    const live = refreshCookieOf(await refresh(ctx, first)).value;
    const { rows } = await ctx.db.query<{ id: string }>(
      'SELECT id FROM refresh_tokens WHERE session_id = $1 AND rotated_at IS NOT NULL',
      [s.sessionId],
    );
    const rotatedId = rows[0]!.id;

    // Another transaction holds the first (rotated) token, as a refresh presenting it does
    // before it locks the session.
    const holder = new pg.Client({ connectionString: ctx.database.url });
    const probe = new pg.Client({ connectionString: ctx.database.url });
    await holder.connect();
    await probe.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM refresh_tokens WHERE id = $1 FOR UPDATE', [rotatedId]);
      const deletion = withBearer(ctx, 'POST', '/auth/v0/delete-account', s.accessToken, { password: user.password });
      await untilWaiting(probe, 1); // the deletion waits for the held token
      const rotation = refresh(ctx, live); // locks the live token, then wants the session
      await sleep(300);
      // The holder, like that refresh, goes on to the session, then ends.
      await holder.query('SELECT id FROM sessions WHERE id = $1 FOR UPDATE', [s.sessionId]);
      await holder.query('COMMIT');
      const [deleted, rotated] = await Promise.all([deletion, rotation]);
      expect(deleted.statusCode, deleted.body).toBe(204);
      expect([200, 401]).toContain(rotated.statusCode);
      const left = await ctx.db.query<{ n: number }>(
        `SELECT (SELECT count(*) FROM users WHERE id = $1)::int + (SELECT count(*) FROM sessions WHERE id = $2)::int
                + (SELECT count(*) FROM refresh_tokens WHERE session_id = $2)::int AS n`,
        [user.id, s.sessionId],
      );
      expect(left.rows[0]!.n).toBe(0);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
      await probe.end();
    }
  });
});
