import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, postJson, refresh, refreshCookieOf, resetCode, signIn } from '../helpers/flows.js';

/**
 * Password-reset races (docs/api.md#confirm-a-password-reset), on PGlite and, with
 * TEST_DATABASE_URL, on PostgreSQL where the statements really interleave.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ RATE_LIMIT_PASSWORD_RESET_PER_IP: '0', RATE_LIMIT_PASSWORD_RESET_CONFIRM_PER_IP: '0' });
});
afterAll(async () => ctx.close());

const ROUNDS = 5;

const resetCodeFor = async (email: string): Promise<string> => {
  expect((await postJson(ctx, '/auth/v0/password-reset', { email })).statusCode).toBe(204);
  return (await resetCode(ctx, email)).code;
};

describe('password-reset races', () => {
  it('a reset racing a refresh leaves no live session: the rotated token, if any, is dead too', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const user = await createVerifiedUser(ctx);
      const s = await signIn(ctx, { username: user.username, password: PASSWORD });
      const code = await resetCodeFor(user.email);
      const [refreshed, confirmed] = await Promise.all([
        refresh(ctx, s.refreshToken),
        postJson(ctx, '/auth/v0/password-reset/confirm', { email: user.email, code, new_password: 'plum tractor velvet harbour' }),
      ]);
      expect(confirmed.statusCode).toBe(204);
      if (refreshed.statusCode === 200) {
        expect((await refresh(ctx, refreshCookieOf(refreshed).value)).statusCode).toBe(401);
        const access = (refreshed.json() as { tokens: { access_token: string } }).tokens.access_token;
        expect((await ctx.app.inject({ method: 'GET', url: '/auth/v0/me', headers: { authorization: `Bearer ${access}` } })).statusCode).toBe(401);
      } else {
        expect(refreshed.statusCode).toBe(401);
      }
      const { rows } = await ctx.db.query('SELECT id FROM sessions WHERE user_id = $1 AND revoked_at IS NULL', [user.id]);
      expect(rows).toEqual([]);
    }
  });

  it('five parallel confirmations of one code: exactly one 204, the others 410; one notice', async () => {
    const user = await createVerifiedUser(ctx);
    const code = await resetCodeFor(user.email);
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => postJson(ctx, '/auth/v0/password-reset/confirm', { email: user.email, code, new_password: `parallel passphrase number ${i}` })),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([204, 410, 410, 410, 410]);
    const { rows } = await ctx.db.query("SELECT 1 FROM email_outbox WHERE recipient = $1 AND kind = 'notice'", [user.email]);
    expect(rows).toHaveLength(1);
  });
});
