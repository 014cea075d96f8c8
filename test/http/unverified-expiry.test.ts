import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, signUp } from '../helpers/flows.js';

/** docs/api.md#unverified-accounts-expire through the service: a squatted username and address are freed. */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ UNVERIFIED_ACCOUNT_TTL_SECONDS: '86400' }, { startOutboxWorker: false });
});
afterAll(async () => ctx.close());

describe('unverified accounts expire', () => {
  it('a user whose email was never verified is deleted after UNVERIFIED_ACCOUNT_TTL_SECONDS; its username and email can sign up again; verified and phone-only users stay', async () => {
    const squatter = await signUp(ctx);
    expect(squatter.res.statusCode).toBe(201);
    const verified = await createVerifiedUser(ctx);
    const phoneOnly = await signUp(ctx, { email: undefined, phone: `+4477${String(Date.now()).slice(-8)}` });
    expect(phoneOnly.res.statusCode).toBe(201);

    ctx.clock.advance(86_400 - 1);
    expect((await ctx.app.retention.runOnce()).unverifiedUsers).toBe(0);
    expect((await signUp(ctx, { username: squatter.request.username })).res.statusCode).toBe(409);

    ctx.clock.advance(2);
    expect((await ctx.app.retention.runOnce()).unverifiedUsers).toBe(1);
    const again = await signUp(ctx, { username: squatter.request.username, email: squatter.request.email });
    expect(again.res.statusCode, again.res.body).toBe(201);
    const { rows } = await ctx.db.query<{ id: string }>('SELECT id FROM users WHERE id = ANY($1::uuid[])', [[verified.id, phoneOnly.body.user.id]]);
    expect(rows).toHaveLength(2);
    const metrics = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/^auth_accounts_deleted_total\{cause="unverified_expired"\} 1$/m);
  });
});
