import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, emailChangeCode, PASSWORD, postJson, signIn, uniqueName } from '../helpers/flows.js';

/**
 * Email-change races (docs/api.md#confirm-an-email-change), on PGlite and, with
 * TEST_DATABASE_URL, on PostgreSQL where the statements really interleave.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ RATE_LIMIT_CHANGE_EMAIL_PER_USER: '0', RATE_LIMIT_CHANGE_EMAIL_CONFIRM_PER_IP: '0' }, { startOutboxWorker: false });
});
afterAll(async () => ctx.close());

const ROUNDS = 5;

/** A signed-in verified user who asked to move to `target`; returns its token and the code emailed to `target`. */
async function pendingChange(target: string) {
  const user = await createVerifiedUser(ctx);
  const { accessToken } = await signIn(ctx, { username: user.username, password: PASSWORD });
  const res = await postJson(ctx, '/auth/v0/change-email', { new_email: target, password: PASSWORD }, { authorization: `Bearer ${accessToken}` });
  expect(res.statusCode, res.body).toBe(204);
  return { user, token: accessToken, code: await emailChangeCode(ctx, target, ctx.smtp.messages.filter((m) => m.to.includes(target)).length + 1) };
}

const confirm = (token: string, code: string) => postJson(ctx, '/auth/v0/change-email/confirm', { code }, { authorization: `Bearer ${token}` });

describe('email-change races', () => {
  it('five parallel confirmations of one code: exactly one 200, the others 410; one notice', async () => {
    const target = `${uniqueName('race')}@example.test`;
    const { user, token, code } = await pendingChange(target);
    const results = await Promise.all(Array.from({ length: 5 }, () => confirm(token, code)));
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 410, 410, 410, 410]);
    for (const r of results.filter((x) => x.statusCode === 410)) expect(r.json()).toMatchObject({ code: 'auth.change_email.code_expired' });
    const { rows } = await ctx.db.query("SELECT payload->>'notice' AS notice FROM email_outbox WHERE recipient = $1 AND kind = 'notice' ORDER BY created_at, id", [user.email]);
    expect(rows).toEqual([{ notice: 'email_change_requested' }, { notice: 'email_changed' }]);
  });

  it('two users confirming the same new address at once: one 200, the other 409, and the address belongs to the winner', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const target = `${uniqueName('contested')}@example.test`;
      const a = await pendingChange(target);
      const b = await pendingChange(target);
      const [ra, rb] = await Promise.all([confirm(a.token, a.code), confirm(b.token, b.code)]);
      expect([ra.statusCode, rb.statusCode].sort()).toEqual([200, 409]);
      const loser = ra.statusCode === 409 ? ra : rb;
      expect(loser.json()).toMatchObject({ code: 'auth.change_email.email_taken' });
      const winner = ra.statusCode === 200 ? a : b;
      const { rows } = await ctx.db.query<{ id: string }>('SELECT id FROM users WHERE email = $1', [target]);
      expect(rows).toEqual([{ id: winner.user.id }]);
    }
  });
});
