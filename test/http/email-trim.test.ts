/**
 * Emails are trimmed before validation on every route that takes one (docs/api.md#identifiers):
 * the trim is attached only to the routes whose body or query string declares an `email`
 * member (src/plugins/http-hardening.ts), so each of them is exercised here with a padded
 * address, through to its real outcome.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, latestCode, PASSWORD, postJson, resetCode, signUp } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

const padded = (email: string): string => `  ${email}\t `;

describe('emails are trimmed before validation on every route that takes one', () => {
  it('POST /verify-email and POST /verify-email/resend', async () => {
    const { body } = await signUp(ctx);
    const email = body.user.email!;
    expect((await postJson(ctx, '/auth/v0/verify-email/resend', { email: padded(email) })).statusCode).toBeLessThan(300);
    const code = await latestCode(ctx, email);
    expect((await postJson(ctx, '/auth/v0/verify-email', { email: padded(email), code })).statusCode).toBe(204);
    expect((await postJson(ctx, '/auth/v0/sign-in', { email, password: PASSWORD })).statusCode).toBe(200);
  });

  it('GET /verify-email (query string)', async () => {
    const { body } = await signUp(ctx);
    const email = body.user.email!;
    const code = await latestCode(ctx, email);
    const res = await ctx.app.inject({ method: 'GET', url: `/auth/v0/verify-email?email=${encodeURIComponent(padded(email))}&code=${code}` });
    expect(res.statusCode, res.body).toBeLessThan(300);
    // Verified: the email signs in.
    expect((await postJson(ctx, '/auth/v0/sign-in', { email, password: PASSWORD })).statusCode).toBe(200);
  });

  it('POST /sign-in', async () => {
    const user = await createVerifiedUser(ctx);
    const res = await postJson(ctx, '/auth/v0/sign-in', { email: padded(user.email), password: user.password });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('POST /password-reset and POST /password-reset/confirm', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await postJson(ctx, '/auth/v0/password-reset', { email: padded(user.email) })).statusCode).toBeLessThan(300);
    const { code } = await resetCode(ctx, user.email);
    const res = await postJson(ctx, '/auth/v0/password-reset/confirm', { email: padded(user.email), code, new_password: 'plum tractor velvet harbour' });
    expect(res.statusCode, res.body).toBe(204);
  });

  it('control: an address that is not one after trimming is still refused by validation', async () => {
    for (const [url, body] of [
      ['/auth/v0/sign-in', { email: padded('not-an-email'), password: 'x'.repeat(12) }],
      ['/auth/v0/verify-email/resend', { email: padded('not-an-email') }],
      ['/auth/v0/password-reset', { email: padded('not-an-email') }],
    ] as const) {
      const res = await postJson(ctx, url, body);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().code, url).toMatch(/validation_failed$/);
    }
  });
});
