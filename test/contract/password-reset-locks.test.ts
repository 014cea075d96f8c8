import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, postJson, resetCode, signIn, signUp, withBearer } from '../helpers/flows.js';

/**
 * Lock order of the password-reset work (PostgreSQL only: PGlite has one connection, so its
 * transactions never interleave). Reset confirm, change-password and account deletion take the
 * user row first, then the codes; a code is inserted only while its user row is there.
 */

/** Long enough for a statement to reach its lock wait before the next one starts. */
const SETTLE_MS = 300;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ RATE_LIMIT_PASSWORD_RESET_PER_IP: '0', RATE_LIMIT_PASSWORD_RESET_CONFIRM_PER_IP: '0' });
});
afterAll(async () => ctx?.close());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const resetCodeFor = async (email: string): Promise<string> => {
  expect((await postJson(ctx, '/auth/v0/password-reset', { email })).statusCode).toBe(204);
  return (await resetCode(ctx, email)).code;
};

/** Runs `during` while a third transaction holds the user row `FOR UPDATE`; `beforeCommit` runs in that transaction last. */
async function withUserLocked(userId: string, during: () => Promise<void>, beforeCommit?: (holder: pg.Client) => Promise<void>): Promise<void> {
  const holder = new pg.Client({ connectionString: ctx.database.url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [userId]);
    await during();
    if (beforeCommit !== undefined) await beforeCommit(holder);
    await holder.query('COMMIT');
  } finally {
    await holder.end();
  }
}

describe('password-reset lock order', () => {
  it.runIf(process.env.TEST_DB === 'postgres')('a reset confirm queued behind a change-password on one user row: no deadlock, no 500; the change wins and the code is dead', async () => {
    const user = await createVerifiedUser(ctx);
    const code = await resetCodeFor(user.email);
    const s = await signIn(ctx, { username: user.username, password: PASSWORD });
    let change!: ReturnType<typeof withBearer>;
    let confirm!: ReturnType<typeof postJson>;
    await withUserLocked(user.id, async () => {
      change = withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: PASSWORD, new_password: 'another fine passphrase' });
      await sleep(SETTLE_MS * 3); // past argon2id, waiting for the user row
      confirm = postJson(ctx, '/auth/v0/password-reset/confirm', { email: user.email, code, new_password: 'plum tractor velvet harbour' });
      await sleep(SETTLE_MS * 3);
    });
    const [changed, confirmed] = await Promise.all([change, confirm]);
    expect(changed.statusCode, changed.body).toBe(204);
    expect(confirmed.statusCode, confirmed.body).toBe(410);
    expect(confirmed.json().code).toBe('auth.password_reset.code_expired');
  });

  it.runIf(process.env.TEST_DB === 'postgres')('a resend whose user is deleted between the lookup and the insert: 204, no code, no email', async () => {
    const { body } = await signUp(ctx);
    const email = body.user.email!;
    const userId = body.user.id as string;
    let resend!: ReturnType<typeof postJson>;
    await withUserLocked(
      userId,
      async () => {
        resend = postJson(ctx, '/auth/v0/verify-email/resend', { email });
        await sleep(SETTLE_MS);
      },
      async (holder) => void (await holder.query('DELETE FROM users WHERE id = $1', [userId])),
    );
    const res = await resend;
    expect(res.statusCode, res.body).toBe(204);
    expect((await ctx.db.query('SELECT 1 FROM verification_codes WHERE user_id = $1', [userId])).rows).toEqual([]);
  });

  it.runIf(process.env.TEST_DB === 'postgres')('a reset request whose user is deleted while the worker issues its code: the request is suppressed, no code, no email', async () => {
    const user = await createVerifiedUser(ctx);
    await ctx.app.outbox.stop();
    try {
      expect((await postJson(ctx, '/auth/v0/password-reset', { email: user.email })).statusCode).toBe(204);
      let round!: Promise<number>;
      await withUserLocked(
        user.id,
        async () => {
          round = ctx.app.outbox.runOnce();
          await sleep(SETTLE_MS);
        },
        async (holder) => void (await holder.query('DELETE FROM users WHERE id = $1', [user.id])),
      );
      await round;
      const { rows } = await ctx.db.query<{ kind: string; status: string }>("SELECT kind, status FROM email_outbox WHERE recipient = $1 AND kind LIKE 'password_reset%'", [user.email]);
      expect(rows).toEqual([{ kind: 'password_reset_request', status: 'suppressed' }]);
      expect((await ctx.db.query('SELECT 1 FROM verification_codes WHERE user_id = $1', [user.id])).rows).toEqual([]);
    } finally {
      ctx.app.outbox.start();
    }
  });
});
