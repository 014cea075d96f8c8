import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { mailsTo, mailText } from '../helpers/mail.js';
import { createVerifiedUser, signIn, signUp, withBearer } from '../helpers/flows.js';

/**
 * Security notices (docs/api.md#security-notices): queued through the outbox in the transaction
 * of the change, delivered to the real SMTP server, saying what, when, from where and what to do,
 * and carrying no secret.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

describe('change-password sends a password_changed notice', () => {
  it('arrives at the old address with what, when (UTC), IP, user agent and advice, and no secret', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const newPassword = 'plum tractor velvet harbour';
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/auth/v0/change-password',
      headers: { authorization: `Bearer ${s.accessToken}`, 'content-type': 'application/json', 'user-agent': 'NoticeTest/1.0 (X11)' },
      payload: { current_password: user.password, new_password: newPassword },
    });
    expect(res.statusCode).toBe(204);
    const mails = await mailsTo(ctx, user.email, 2); // the verification email, then the notice
    const notice = mails[1]!;
    const text = mailText(notice);
    expect(text).toContain('Subject: Your password was changed');
    expect(text).toContain(`Hello ${user.username}`);
    expect(text).toContain(`When: ${ctx.clock.now().toISOString().slice(0, 10)}`);
    expect(text).toMatch(/When: \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/);
    expect(text).toContain('From: 127.0.0.1');
    expect(text).toContain('Browser or app: "NoticeTest/1[.]0 (X11)"');
    expect(text).toContain('If you did not do this');
    // No secret and nothing that acts on the account: no password, token, code or link.
    for (const secret of [user.password, newPassword, s.accessToken, s.refreshToken]) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/https?:\/\//);
    expect(text).not.toMatch(/\b\d{6}\b/);
    // The outbox row is a notice with no code and no reference to the user.
    const { rows } = await ctx.db.query<{ kind: string; payload: Record<string, unknown> }>(
      `SELECT kind, payload FROM email_outbox WHERE recipient = $1 AND kind = 'notice'`,
      [user.email],
    );
    expect(rows).toHaveLength(1);
    expect(Object.keys(rows[0]!.payload).sort()).toEqual(['at', 'ip', 'notice', 'user_agent', 'username']);
    expect(JSON.stringify(rows[0]!.payload)).not.toContain(user.id);
  });

  it('a failed change (wrong current password) sends nothing', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const res = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: 'not the password at all', new_password: 'plum tractor velvet harbour' });
    expect(res.statusCode).toBe(401);
    await ctx.app.outbox.runOnce();
    const { rows } = await ctx.db.query(`SELECT 1 FROM email_outbox WHERE recipient = $1 AND kind = 'notice'`, [user.email]);
    expect(rows).toHaveLength(0);
  });

  it('a phone-only user changes its password without any notice queued', async () => {
    const { res, request } = await signUp(ctx, { email: undefined, phone: `+1555${String(Date.now()).slice(-7)}` });
    expect(res.statusCode).toBe(201);
    const s = await signIn(ctx, { username: request.username, password: request.password as string });
    const before = (await ctx.db.query(`SELECT 1 FROM email_outbox WHERE kind = 'notice'`)).rows.length;
    expect((await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: request.password, new_password: 'plum tractor velvet harbour' })).statusCode).toBe(204);
    expect((await ctx.db.query(`SELECT 1 FROM email_outbox WHERE kind = 'notice'`)).rows.length).toBe(before);
  });
});
