/**
 * The options of sign-in with identity providers that change its rules: OAUTH_LINK_VERIFIED_EMAIL
 * (docs/api.md#sign-in-mode, step 3) and the per-client limit of flows started
 * (docs/api.md#rate-limits), against the test providers on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, signIn, signUp, uniqueName, withBearer } from '../helpers/flows.js';
import { noticesTo } from '../helpers/mail.js';
import { APP_PAGE, browserAs, claimsOf, expectLanding, refreshIn, signInWith, startTestProviders, type TestProviders } from '../helpers/oauth.js';

let ctx: TestContext;
let providers: TestProviders;

/** RATE_LIMIT_SIGN_IN_PER_IP of this file: 4 flows per sign-in attempt make 8 flows per client in 15 minutes. */
const FLOWS_PER_CLIENT = 8;

beforeAll(async () => {
  providers = await startTestProviders({ OAUTH_LINK_VERIFIED_EMAIL: 'true' });
  ctx = await createTestContext({ ...providers.env, RATE_LIMIT_SIGN_IN_PER_IP: String(FLOWS_PER_CLIENT / 4) });
});
afterAll(async () => {
  await ctx?.close();
  await providers?.close();
});

/** An account at the rogue provider with this verified email. */
function rogueAccount(email: string): string {
  const id = uniqueName('acct');
  providers.rogue.accounts.set(id, { sub: `rogue-${id}`, email, email_verified: true });
  return id;
}

describe('OAUTH_LINK_VERIFIED_EMAIL=true', () => {
  it('links the identity to the user with that verified email, with a notice, and signs that user in; the identity signs in from then on', async () => {
    const owner = await createVerifiedUser(ctx);
    const id = rogueAccount(owner.email);
    const browser = browserAs(ctx, providers, id);
    expectLanding(await signInWith(browser, 'rogue'), APP_PAGE);
    expect(claimsOf((await refreshIn(browser)).accessToken!)).toMatchObject({ sub: owner.id, amr: ['oauth'] });
    expect(await noticesTo(ctx, owner.email)).toEqual([{ notice: 'identity_linked', details: ['Provider: rogue'] }]);
    const session = await signIn(ctx, { username: owner.username, password: PASSWORD });
    const list = (await withBearer(ctx, 'GET', '/auth/v0/identities', session.accessToken)).json() as { identities: { provider: string }[] };
    expect(list.identities.map((i) => i.provider)).toEqual(['rogue']);
    expectLanding(await signInWith(browserAs(ctx, providers, id), 'rogue'), APP_PAGE);
    expect(await noticesTo(ctx, owner.email)).toHaveLength(1);
  });

  it('never to an unverified address: the pre-registration takeover still fails (auth.oauth.account_exists, nothing linked or verified)', async () => {
    const victimEmail = `${uniqueName('victim')}@provider.test`;
    const attacker = await signUp(ctx, { email: victimEmail, password: 'attacker chosen password 1' });
    expect(attacker.res.statusCode).toBe(201);
    const browser = browserAs(ctx, providers, rogueAccount(victimEmail));
    expectLanding(await signInWith(browser, 'rogue'), APP_PAGE, 'auth.oauth.account_exists');
    const { rows } = await ctx.db.query<{ is_email_verified: boolean; identities: number }>(
      'SELECT is_email_verified, (SELECT count(*)::int FROM user_identities WHERE user_id = users.id) AS identities FROM users WHERE id = $1',
      [attacker.body.user.id],
    );
    expect(rows[0]).toEqual({ is_email_verified: false, identities: 0 });
    expect((await refreshIn(browser)).status).toBe(401);
  });
});

describe('flows started per client', () => {
  it('429 auth.oauth.too_many_attempts with Retry-After past the limit, for authorize and link alike; another client is not affected', async () => {
    const remoteAddress = '203.0.113.7';
    for (let i = 0; i < FLOWS_PER_CLIENT; i++) {
      expect((await ctx.app.inject({ method: 'GET', url: '/auth/v0/oauth/rogue/authorize', remoteAddress })).statusCode).toBe(302);
    }
    const refused = await ctx.app.inject({ method: 'GET', url: '/auth/v0/oauth/rogue/authorize', remoteAddress });
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'auth.oauth.too_many_attempts' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers['set-cookie']).toBeUndefined();
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const link = await ctx.app.inject({
      method: 'POST',
      url: '/auth/v0/oauth/rogue/link',
      remoteAddress,
      headers: { authorization: `Bearer ${session.accessToken}`, 'content-type': 'application/json' },
      payload: '{}',
    });
    expect([link.statusCode, link.json().code]).toEqual([429, 'auth.oauth.too_many_attempts']);
    expect((await ctx.app.inject({ method: 'GET', url: '/auth/v0/oauth/rogue/authorize', remoteAddress: '198.51.100.4' })).statusCode).toBe(302);
  });
});
