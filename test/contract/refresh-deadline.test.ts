import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRefreshToken, parseRefreshToken } from '../../src/crypto/refresh-token.js';
import { sqlState } from '../../src/db/db.js';
import { createStatementDeadlines, STATEMENT_DEADLINE_MS } from '../../src/db/statement-deadline.js';
import { rotateLiveRefreshToken } from '../../src/modules/sessions/refresh-tokens.repo.js';
import { LAST_USED_RESOLUTION_SECONDS } from '../../src/modules/sessions/sessions.repo.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, refresh, signIn } from '../helpers/flows.js';

/**
 * The deadline of the refresh rotation (docs/reliability.md, "Database silent"): the statement
 * runs on its own and must not commit once its deadline on the database's clock has passed.
 */

/** SQLSTATE 57014 (query_canceled): what `statement_deadline_check` raises, answered 503. */
const QUERY_CANCELED = '57014';
/** Slack for the two clocks read a few milliseconds apart, and a busy machine. */
const CLOCK_SLACK_MS = 1_000;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx?.close());

/** A signed-in session's live refresh token and the arguments of one rotation of it. */
async function rotation(deadline: Date | null) {
  const user = await createVerifiedUser(ctx);
  const { refreshToken, sessionId } = await signIn(ctx, { username: user.username, password: user.password });
  const successor = newRefreshToken();
  const args = {
    presented: parseRefreshToken(refreshToken)!,
    now: ctx.clock.now(),
    successor: { id: successor.id, tokenHash: successor.tokenHash, ciphertext: null },
    lastUsedResolutionSeconds: LAST_USED_RESOLUTION_SECONDS,
    deadline,
  };
  return { refreshToken, sessionId, successor, args };
}

describe('rotateLiveRefreshToken and its deadline', () => {
  it('a deadline already passed on the database clock: fails with 57014 and commits nothing; the token is still live', async () => {
    const { refreshToken, sessionId, args } = await rotation(new Date(Date.now() - CLOCK_SLACK_MS));
    const failure = await rotateLiveRefreshToken(ctx.db, args).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(sqlState(failure)).toBe(QUERY_CANCELED);
    const tokens = await ctx.db.query<{ rotated_at: Date | null }>('SELECT rotated_at FROM refresh_tokens WHERE session_id = $1', [sessionId]);
    expect(tokens.rows).toEqual([{ rotated_at: null }]);
    const r = await refresh(ctx, refreshToken);
    expect(r.statusCode, r.body).toBe(200);
  });

  it('a deadline ahead: rotates, and reports the database clock', async () => {
    const { sessionId, args } = await rotation(new Date(Date.now() + STATEMENT_DEADLINE_MS));
    const rotated = await rotateLiveRefreshToken(ctx.db, args);
    expect(rotated?.session_id).toBe(sessionId);
    expect(Math.abs(rotated!.database_now.getTime() - Date.now())).toBeLessThan(CLOCK_SLACK_MS);
    const tokens = await ctx.db.query<{ token_hash: string; rotated: boolean }>(
      'SELECT token_hash, rotated_at IS NOT NULL AS rotated FROM refresh_tokens WHERE session_id = $1 ORDER BY created_at, rotated DESC',
      [sessionId],
    );
    expect(tokens.rows.filter((t) => !t.rotated)).toEqual([{ token_hash: args.successor.tokenHash, rotated: false }]);
  });

  // PGlite has one connection: the session row cannot be held by another transaction meanwhile.
  it.runIf(process.env.TEST_DB === 'postgres')(
    'a lock on the session held past the deadline (a reuse or grace transaction): the rotation waits for it before its check, fails with 57014, and the token is still live',
    async () => {
      const holdMs = 2_500;
      const { refreshToken, sessionId, args } = await rotation(new Date(Date.now() + holdMs / 2));
      // The session's use was just recorded at sign-in, so the rotation writes nothing to the
      // session row itself: only the successor's foreign key (a key-share lock) waits on it.
      let rotating: Promise<unknown> | undefined;
      await ctx.db.transaction(async (tx) => {
        await tx.query('SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE', [sessionId]);
        rotating = rotateLiveRefreshToken(ctx.db, args).then(
          () => undefined,
          (err: unknown) => err,
        );
        await new Promise((resolve) => setTimeout(resolve, holdMs));
      });
      expect(sqlState(await rotating)).toBe(QUERY_CANCELED);
      const tokens = await ctx.db.query<{ rotated_at: Date | null }>('SELECT rotated_at FROM refresh_tokens WHERE session_id = $1', [sessionId]);
      expect(tokens.rows).toEqual([{ rotated_at: null }]);
      const r = await refresh(ctx, refreshToken);
      expect(r.statusCode, r.body).toBe(200);
    },
  );

  it('no deadline (the embedded database): rotates', async () => {
    const { sessionId, args } = await rotation(null);
    expect((await rotateLiveRefreshToken(ctx.db, args))?.session_id).toBe(sessionId);
  });
});

describe('createStatementDeadlines', () => {
  it('on PostgreSQL, STATEMENT_DEADLINE_MS ahead of the database clock (not the moved application clock); on PGlite, none', async () => {
    ctx.clock.advance(3600); // the application clock is not what the deadline follows
    const deadline = await createStatementDeadlines(ctx.db).next();
    if (ctx.db.kind === 'pglite') {
      expect(deadline).toBeNull();
      return;
    }
    const { rows } = await ctx.db.query<{ now: Date }>('SELECT clock_timestamp() AS now');
    const ahead = deadline!.getTime() - rows[0]!.now.getTime();
    expect(ahead).toBeGreaterThan(STATEMENT_DEADLINE_MS - CLOCK_SLACK_MS);
    expect(ahead).toBeLessThanOrEqual(STATEMENT_DEADLINE_MS);
  });
});
