import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, refresh, refreshCookieOf, signIn } from '../helpers/flows.js';

/**
 * Lock order of a rotation against a grace replay (PostgreSQL only: PGlite has one connection,
 * so its transactions never interleave). A rotation locks the live token and its session and
 * then erases the seal its parent holds; a grace replay of that parent locks the parent first
 * and then the session. Waiting for the parent's row would deadlock the two.
 */

/** Long enough for a statement to reach its lock wait before the next one starts. */
const SETTLE_MS = 300;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ REFRESH_REUSE_GRACE_SECONDS: '30' });
});
afterAll(async () => ctx?.close());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a rotation and a grace replay of its parent, queued behind one session lock', () => {
  it.runIf(process.env.TEST_DB === 'postgres')('both finish without a deadlock or a 500; the parent is then a grandparent (reuse)', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const parent = s.refreshToken;
    const live = refreshCookieOf(await refresh(ctx, parent)).value;

    // A third transaction holds the session row, so both requests queue behind it.
    const holder = new pg.Client({ connectionString: ctx.database.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM sessions WHERE id = $1 FOR UPDATE', [s.sessionId]);
      const rotation = refresh(ctx, live); // locks the live token, waits for the session
      await sleep(SETTLE_MS);
      const replay = refresh(ctx, parent); // locks the parent, waits for the session
      await sleep(SETTLE_MS);
      await holder.query('COMMIT');
      const [rotated, replayed] = await Promise.all([rotation, replay]);
      expect(rotated.statusCode, rotated.body).toBe(200);
      // The live token moved on before the replay got the session: the parent is a grandparent.
      expect(replayed.statusCode, replayed.body).toBe(401);
      expect(replayed.json().code).toBe('auth.refresh_token_reused');
    } finally {
      await holder.end();
    }
  });
});
