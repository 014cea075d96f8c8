/**
 * Linking identity providers, the identities list, unlinking, the first password of a user who
 * has none, and the recent-sign-in rule that stands in for a password
 * (docs/api.md#link-an-identity-provider, #list-identities, #unlink-an-identity,
 * #set-a-password, #users-without-a-password), against real providers on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, emailChangeCode, PASSWORD, postJson, resetCode, setCookies, signIn, uniqueName, withBearer } from '../helpers/flows.js';
import { codeNow, nextStep } from '../helpers/mfa.js';
import { noticesTo } from '../helpers/mail.js';
import {
  APP_PAGE,
  browserAs,
  claimsOf,
  expectLanding,
  PUBLIC_URL,
  refreshIn,
  runFlow,
  SETTINGS_PAGE,
  signInWith,
  startTestProviders,
  type TestProviders,
} from '../helpers/oauth.js';
import type { TestBrowser } from '../helpers/oauth-browser.js';
import { register } from '../helpers/passkeys.js';
import { SoftwareAuthenticator } from '../helpers/webauthn.js';

let ctx: TestContext;
let providers: TestProviders;

beforeAll(async () => {
  providers = await startTestProviders();
  ctx = await createTestContext(providers.env);
});
afterAll(async () => {
  await ctx?.close();
  await providers?.close();
});

/** REAUTH_MAX_AGE_SECONDS's default, and one second more. */
const REAUTH_MAX_AGE = 600;
const TOO_OLD = REAUTH_MAX_AGE + 1;
const IDENTITY_KEYS = ['created_at', 'email', 'id', 'last_sign_in_at', 'provider'];

/** An account at every test provider. */
function account(email?: string): { id: string; email: string } {
  const id = uniqueName('acct');
  const address = email ?? `${id}@provider.test`;
  const claims = { email: address, email_verified: true };
  providers.op.accounts.set(id, claims);
  providers.rogue.accounts.set(id, { sub: `rogue-${id}`, ...claims });
  providers.github.accounts.set(id, { id: 2_000_000 + providers.github.accounts.size, login: id, emails: [{ email: address, primary: true, verified: true }] });
  return { id, email: address };
}

/** A user signed up through `provider`, signed in now: the browser, its access token and its email. */
async function providerUser(provider = 'rogue') {
  const who = account();
  const browser = browserAs(ctx, providers, who.id);
  expectLanding(await signInWith(browser, provider, { account: who.id }), APP_PAGE);
  const { accessToken, sessionId } = await refreshIn(browser);
  return { who, browser, token: accessToken!, sessionId: sessionId! };
}

/**
 * The events (docs/api.md#events-and-webhooks) of the user with this email, in the order they
 * were recorded, as [type, data] with the identity's id and the User left out.
 */
async function identityEventsOf(email: string): Promise<[string, unknown][]> {
  const { rows } = await ctx.db.query<{ type: string; data: Record<string, unknown> }>(
    `SELECT e.type, e.data FROM webhook_events e JOIN users u ON u.id::text IN (e.data->>'user_id', e.data->'user'->>'id')
      WHERE u.email = $1 AND e.type IN ('user.created', 'identity.linked', 'identity.unlinked', 'password.changed') ORDER BY e.id`,
    [email],
  );
  return rows.map(({ type, data }) => [type, type === 'user.created' ? Object.keys(data) : { ...data, user_id: typeof data.user_id, identity_id: typeof data.identity_id }]);
}

/** A fresh sign-in of an existing provider user: a new session, so a recent sign-in. */
async function signInAgain(who: { id: string }, provider = 'rogue'): Promise<string> {
  const browser = browserAs(ctx, providers, who.id);
  expectLanding(await signInWith(browser, provider, { account: who.id }), APP_PAGE);
  return (await refreshIn(browser)).accessToken!;
}

/** POST link as `token`; the response. */
function link(token: string, provider: string, body: unknown = {}) {
  return withBearer(ctx, 'POST', `/auth/v0/oauth/${provider}/link`, token, body);
}

/** Links `provider` (as account `who`) to `token`'s user with a browser; the flow's end. */
async function linkWith(token: string, provider: string, who: { id: string }, body: unknown = { redirect_to: SETTINGS_PAGE }, browser?: TestBrowser) {
  const res = await link(token, provider, body);
  expect(res.statusCode, res.body).toBe(200);
  const b = browser ?? browserAs(ctx, providers, who.id);
  const cookie = setCookies(res).find((c) => c.name === 'oauth_flow')!;
  b.setCookie(PUBLIC_URL, 'oauth_flow', cookie.value, '/auth/v0/oauth');
  return runFlow(b, (res.json() as { authorization_url: string }).authorization_url, who.id);
}

async function identities(token: string) {
  const res = await withBearer(ctx, 'GET', '/auth/v0/identities', token);
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { identities: { id: string; provider: string; email: string | null; created_at: string; last_sign_in_at: string | null }[] }).identities;
}

describe('POST /auth/v0/oauth/{provider}/link', () => {
  it('200 {authorization_url} with the oauth_flow cookie; the callback links with a notice, lands on redirect_to, creates no session; the identity then signs in as this user', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const who = account();
    const res = await link(session.accessToken, 'op', { redirect_to: SETTINGS_PAGE });
    expect(res.statusCode).toBe(200);
    expect(Object.keys(res.json() as object)).toEqual(['authorization_url']);
    expect(setCookies(res).find((c) => c.name === 'oauth_flow')).toMatchObject({ attributes: { path: '/auth/v0/oauth', samesite: 'Lax', httponly: true, secure: true, 'max-age': '600' } });
    const browser = browserAs(ctx, providers, who.id);
    browser.setCookie(PUBLIC_URL, 'oauth_flow', setCookies(res).find((c) => c.name === 'oauth_flow')!.value, '/auth/v0/oauth');
    const end = await runFlow(browser, (res.json() as { authorization_url: string }).authorization_url, who.id);
    expectLanding(end, SETTINGS_PAGE);
    expect(end.last.setCookies.some((c) => c.startsWith('refresh_token='))).toBe(false);
    const list = await identities(session.accessToken);
    expect(list).toHaveLength(1);
    expect(Object.keys(list[0]!).sort()).toEqual(IDENTITY_KEYS);
    expect(list[0]).toMatchObject({ provider: 'op', email: who.email, last_sign_in_at: null });
    expect(await noticesTo(ctx, user.email)).toEqual([{ notice: 'identity_linked', details: ['Provider: Test OP'] }]);
    // The identity signs in as this user, whose own email differs from the provider's.
    const signedIn = browserAs(ctx, providers, who.id);
    expectLanding(await signInWith(signedIn, 'op', { account: who.id }), APP_PAGE);
    expect(claimsOf((await refreshIn(signedIn)).accessToken!)).toMatchObject({ sub: user.id, amr: ['oauth'] });
    expect((await identities(session.accessToken))[0]!.last_sign_in_at).not.toBeNull();
    // Linking the same identity again: success, nothing changes, no second notice.
    expectLanding(await linkWith(session.accessToken, 'op', who), SETTINGS_PAGE);
    expect(await identities(session.accessToken)).toHaveLength(1);
    expect(await noticesTo(ctx, user.email)).toHaveLength(1);
  });

  it('refusals: no Bearer 401; unknown provider 404; a bad redirect_to 400; an unknown member or no JSON object 400 auth.oauth.validation_failed; a sign-in older than REAUTH_MAX_AGE_SECONDS 401 auth.reauthentication_required', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const none = await postJson(ctx, '/auth/v0/oauth/op/link', {});
    expect(none.statusCode).toBe(401);
    expect((await link(session.accessToken, 'nope')).json()).toMatchObject({ code: 'auth.oauth.unknown_provider' });
    const bad = await link(session.accessToken, 'op', { redirect_to: 'https://evil.example/settings' });
    expect([bad.statusCode, bad.json().code]).toEqual([400, 'auth.oauth.invalid_redirect']);
    const unknown = await link(session.accessToken, 'op', { redirect_to: SETTINGS_PAGE, provider: 'github' });
    expect([unknown.statusCode, unknown.json().code]).toEqual([400, 'auth.oauth.validation_failed']);
    const noBody = await ctx.app.inject({ method: 'POST', url: '/auth/v0/oauth/op/link', headers: { authorization: `Bearer ${session.accessToken}` } });
    expect([noBody.statusCode, noBody.json()]).toEqual([400, { code: 'auth.oauth.validation_failed', message: 'body must be a JSON object' }]);
    expect((await link(session.accessToken, 'op', {})).statusCode).toBe(200);
    ctx.clock.advance(TOO_OLD);
    const stale = await link(session.accessToken, 'op');
    expect([stale.statusCode, stale.json().code]).toEqual([401, 'auth.reauthentication_required']);
    expect(stale.headers['set-cookie']).toBeUndefined();
    // A refresh does not make a sign-in recent; a new sign-in does.
    const fresh = await signIn(ctx, { username: user.username, password: PASSWORD });
    expect((await link(fresh.accessToken, 'op')).statusCode).toBe(200);
  });

  it('error=auth.oauth.identity_taken: the identity belongs to another user, who keeps it', async () => {
    const owner = await providerUser('github');
    const other = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: other.username, password: PASSWORD });
    expectLanding(await linkWith(session.accessToken, 'github', owner.who), SETTINGS_PAGE, 'auth.oauth.identity_taken');
    expect(await identities(session.accessToken)).toEqual([]);
    expect((await identities(owner.token)).map((i) => i.provider)).toEqual(['github']);
    expect(await noticesTo(ctx, other.email)).toEqual([]);
  });

  it('error=auth.oauth.link_expired: the session that asked was revoked before the callback; nothing is linked', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const who = account();
    const res = await link(session.accessToken, 'rogue');
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', session.accessToken)).statusCode).toBe(204);
    const browser = browserAs(ctx, providers, who.id);
    browser.setCookie(PUBLIC_URL, 'oauth_flow', setCookies(res).find((c) => c.name === 'oauth_flow')!.value, '/auth/v0/oauth');
    expectLanding(await runFlow(browser, (res.json() as { authorization_url: string }).authorization_url, who.id), APP_PAGE, 'auth.oauth.link_expired');
    const again = await signIn(ctx, { username: user.username, password: PASSWORD });
    expect(await identities(again.accessToken)).toEqual([]);
  });
});

describe('GET /auth/v0/identities and DELETE /auth/v0/identities/{identity_id}', () => {
  it('lists only the caller\'s identities, oldest first; 401 without a Bearer', async () => {
    const a = await providerUser('rogue');
    const b = await providerUser('rogue');
    expect((await identities(a.token)).map((i) => [i.provider, i.email])).toEqual([['rogue', a.who.email]]);
    ctx.clock.advance(1);
    expectLanding(await linkWith(a.token, 'github', a.who), SETTINGS_PAGE);
    expect((await identities(a.token)).map((i) => i.provider)).toEqual(['rogue', 'github']);
    expect((await identities(b.token)).map((i) => i.provider)).toEqual(['rogue']);
    expect((await ctx.app.inject({ method: 'GET', url: '/auth/v0/identities' })).statusCode).toBe(401);
  });

  it('unlink: never the last way in (409); another user\'s 403, unknown or not a UUID 404, a stale sign-in 401; with another identity, a password or a passkey: 204 with a notice', async () => {
    const user = await providerUser('rogue');
    const [only] = await identities(user.token);
    const del = (token: string, id: string) => withBearer(ctx, 'DELETE', `/auth/v0/identities/${id}`, token);
    const last = await del(user.token, only!.id);
    expect([last.statusCode, last.json().code]).toEqual([409, 'auth.identities.last_sign_in_method']);
    const stranger = await providerUser('rogue');
    const foreign = await del(stranger.token, only!.id);
    expect([foreign.statusCode, foreign.json().code]).toEqual([403, 'auth.identities.forbidden']);
    for (const id of ['not-a-uuid', '00000000-0000-4000-8000-000000000000']) {
      const missing = await del(user.token, id);
      expect([missing.statusCode, missing.json().code], id).toEqual([404, 'auth.identities.not_found']);
    }
    expect(await identities(user.token)).toHaveLength(1);

    // Another identity: the first may go, with a notice; then the second is the last.
    expectLanding(await linkWith(user.token, 'github', user.who), SETTINGS_PAGE);
    ctx.clock.advance(TOO_OLD);
    const stale = await del(user.token, only!.id);
    expect([stale.statusCode, stale.json().code]).toEqual([401, 'auth.reauthentication_required']);
    const token = await signInAgain(user.who, 'github');
    expect((await del(token, only!.id)).statusCode).toBe(204);
    const remaining = await identities(token);
    expect(remaining.map((i) => i.provider)).toEqual(['github']);
    expect((await noticesTo(ctx, user.who.email)).map((n) => [n.notice, n.details])).toEqual([
      ['identity_linked', ['Provider: GitHub']],
      ['identity_unlinked', ['Provider: rogue']],
    ]);
    expect((await del(token, remaining[0]!.id)).statusCode).toBe(409);

    // A passkey is a way in: the last identity may go.
    expect((await register(ctx, token, new SoftwareAuthenticator())).statusCode).toBe(201);
    expect((await del(token, remaining[0]!.id)).statusCode).toBe(204);
    expect(await identities(token)).toEqual([]);
    // One event per change, in the change's transaction: the sign-up, both links, both unlinks.
    const linked = (provider: string) => ['identity.linked', { user_id: 'string', identity_id: 'string', provider }];
    const unlinked = (provider: string) => ['identity.unlinked', { user_id: 'string', identity_id: 'string', provider }];
    expect(await identityEventsOf(user.who.email)).toEqual([['user.created', ['user']], linked('rogue'), linked('github'), unlinked('rogue'), unlinked('github')]);
    // The provider's account no longer signs in; the address is the user's: account_exists.
    expectLanding(await signInWith(browserAs(ctx, providers, user.who.id), 'github'), APP_PAGE, 'auth.oauth.account_exists');
  });
});

describe('POST /auth/v0/password: the first password of a user who has none', () => {
  it('in order: a recent sign-in (401), no password yet (409), the policy (400); 204 keeps the sessions and queues a notice; the password then signs in', async () => {
    const user = await providerUser('rogue');
    const set = (token: string, body: unknown) => withBearer(ctx, 'POST', '/auth/v0/password', token, body);
    ctx.clock.advance(TOO_OLD);
    const stale = await set(user.token, { new_password: 'a good new password 1' });
    expect([stale.statusCode, stale.json().code]).toEqual([401, 'auth.reauthentication_required']);
    // The order holds for a password the policy refuses too: the recent sign-in comes first.
    const staleShort = await set(user.token, { new_password: 'short' });
    expect([staleShort.statusCode, staleShort.json().code]).toEqual([401, 'auth.reauthentication_required']);
    const token = await signInAgain(user.who);
    for (const [body, message] of [
      [{ new_password: 'short' }, expect.stringContaining('new_password must be 8 to 72 characters')],
      [{ new_password: 'password' }, expect.stringContaining('common')],
      [{ new_password: 'a good new password 1', extra: 1 }, 'unknown member "extra"'],
      [{}, 'new_password is required'],
    ] as const) {
      const res = await set(token, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json()).toEqual({ code: 'auth.password.validation_failed', message });
    }
    const ok = await set(token, { new_password: 'a good new password 1' });
    expect(ok.statusCode, ok.body).toBe(204);
    expect(ok.headers['set-cookie']).toBeUndefined();
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', token)).statusCode).toBe(200);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', user.token)).statusCode).toBe(200);
    expect((await noticesTo(ctx, user.who.email)).map((n) => n.notice)).toEqual(['password_set']);
    expect((await identityEventsOf(user.who.email)).at(-1)).toEqual(['password.changed', { user_id: 'string', identity_id: 'undefined', via: 'set' }]);
    const again = await set(token, { new_password: 'another good password 2' });
    expect([again.statusCode, again.json().code]).toEqual([409, 'auth.password.already_set']);
    const againShort = await set(token, { new_password: 'short' });
    expect([againShort.statusCode, againShort.json().code]).toEqual([409, 'auth.password.already_set']);
    expect((await postJson(ctx, '/auth/v0/sign-in', { email: user.who.email, password: 'a good new password 1' })).statusCode).toBe(200);
  });

  it('a user with a password: 409 auth.password.already_set (with a recent sign-in), 401 with a stale one', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const res = await withBearer(ctx, 'POST', '/auth/v0/password', session.accessToken, { new_password: 'a good new password 1' });
    expect([res.statusCode, res.json().code]).toEqual([409, 'auth.password.already_set']);
    ctx.clock.advance(TOO_OLD);
    const stale = await withBearer(ctx, 'POST', '/auth/v0/password', session.accessToken, { new_password: 'a good new password 1' });
    expect([stale.statusCode, stale.json().code]).toEqual([401, 'auth.reauthentication_required']);
  });
});

describe('users without a password: a recent sign-in instead of `password`', () => {
  it('change-email: 204 without password when recent, 401 auth.reauthentication_required when not, 401 auth.invalid_current_password with one', async () => {
    const user = await providerUser('rogue');
    const newEmail = `${uniqueName('moved')}@example.test`;
    const withPassword = await withBearer(ctx, 'POST', '/auth/v0/change-email', user.token, { new_email: newEmail, password: PASSWORD });
    expect([withPassword.statusCode, withPassword.json().code]).toEqual([401, 'auth.invalid_current_password']);
    const ok = await withBearer(ctx, 'POST', '/auth/v0/change-email', user.token, { new_email: newEmail });
    expect(ok.statusCode, ok.body).toBe(204);
    const code = await emailChangeCode(ctx, newEmail);
    expect((await withBearer(ctx, 'POST', '/auth/v0/change-email/confirm', user.token, { code })).statusCode).toBe(200);
    ctx.clock.advance(TOO_OLD);
    const stale = await withBearer(ctx, 'POST', '/auth/v0/change-email', user.token, { new_email: `x${newEmail}` });
    expect([stale.statusCode, stale.json().code]).toEqual([401, 'auth.reauthentication_required']);
  });

  it('second factor: setup, disable and new recovery codes without password; change-password is 401 (its current_password can never match)', async () => {
    const user = await providerUser('rogue');
    const setup = await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', user.token, {});
    expect(setup.statusCode, setup.body).toBe(200);
    const { secret } = setup.json() as { secret: string };
    expect((await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/enable', user.token, { code: codeNow(ctx, secret) })).statusCode).toBe(200);
    nextStep(ctx);
    expect((await withBearer(ctx, 'POST', '/auth/v0/mfa/recovery-codes', user.token, { code: codeNow(ctx, secret) })).statusCode).toBe(200);
    nextStep(ctx);
    expect((await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/disable', user.token, { code: codeNow(ctx, secret) })).statusCode).toBe(204);
    const change = await withBearer(ctx, 'POST', '/auth/v0/change-password', user.token, { current_password: '', new_password: 'a good new password 1' });
    expect([change.statusCode, change.json().code]).toEqual([401, 'auth.invalid_current_password']);
    ctx.clock.advance(TOO_OLD);
    const stale = await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', user.token, {});
    expect([stale.statusCode, stale.json().code]).toEqual([401, 'auth.reauthentication_required']);
  });

  it('delete-account: 204 without password when recent; the identities go with the user', async () => {
    const user = await providerUser('rogue');
    const res = await withBearer(ctx, 'POST', '/auth/v0/delete-account', user.token, {});
    expect(res.statusCode, res.body).toBe(204);
    const { rows } = await ctx.db.query('SELECT 1 FROM user_identities WHERE email = $1', [user.who.email]);
    expect(rows).toEqual([]);
    // The address is free: the provider's next sign-in is a new account.
    expectLanding(await signInWith(browserAs(ctx, providers, user.who.id), 'rogue'), APP_PAGE);
  });

  it('a password reset sets a password for a user who has none', async () => {
    const user = await providerUser('rogue');
    expect((await postJson(ctx, '/auth/v0/password-reset', { email: user.who.email })).statusCode).toBe(204);
    const { code } = await resetCode(ctx, user.who.email);
    const confirm = await postJson(ctx, '/auth/v0/password-reset/confirm', { email: user.who.email, code, new_password: 'a good new password 1' });
    expect(confirm.statusCode, confirm.body).toBe(204);
    expect((await postJson(ctx, '/auth/v0/sign-in', { email: user.who.email, password: 'a good new password 1' })).statusCode).toBe(200);
  });

  it('a user with a password must still give it: 400 …validation_failed "password is required"', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    for (const [url, body, code] of [
      ['/auth/v0/delete-account', {}, 'auth.delete_account.validation_failed'],
      ['/auth/v0/change-email', { new_email: `${uniqueName('n')}@example.test` }, 'auth.change_email.validation_failed'],
      ['/auth/v0/mfa/totp/setup', {}, 'auth.mfa.validation_failed'],
    ] as const) {
      const res = await withBearer(ctx, 'POST', url, session.accessToken, body);
      expect(res.statusCode, url).toBe(400);
      expect(res.json()).toEqual({ code, message: 'password is required' });
    }
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(200);
  });
});
