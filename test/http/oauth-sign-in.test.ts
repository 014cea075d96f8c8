/**
 * Sign-in with an identity provider (docs/api.md#sign-in-with-an-identity-provider), against
 * real providers on 127.0.0.1: panva's oidc-provider (query and form_post), a GitHub-compatible
 * server, and an OpenID Provider that misbehaves on demand. The browser is driven over HTTP
 * (test/helpers/oauth-browser.ts): the service through app.inject, the providers for real.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, postJson, setCookies, signUp, uniqueName, withBearer } from '../helpers/flows.js';
import { codeNow, nextStep, secondStep } from '../helpers/mfa.js';
import { noticesTo } from '../helpers/mail.js';
import {
  APP_PAGE,
  browserAs,
  callbackUrl,
  claimsOf,
  expectLanding,
  freePort,
  PUBLIC_URL,
  refreshIn,
  runFlow,
  SETTINGS_PAGE,
  signInWith,
  startTestProviders,
  type TestProviders,
} from '../helpers/oauth.js';
import { TestBrowser } from '../helpers/oauth-browser.js';
import { startRogueProvider, type TestRogueProvider } from '../helpers/rogue-provider.js';
import { banUser } from '../../src/modules/users/users.service.js';

let ctx: TestContext;
let providers: TestProviders;
/** A provider whose discovery fails at start: nothing listens on its port until a test starts it. */
let latePort: number;
let late: TestRogueProvider | undefined;

beforeAll(async () => {
  providers = await startTestProviders();
  latePort = await freePort();
  ctx = await createTestContext({
    ...providers.env,
    OAUTH_PROVIDERS: `${providers.env.OAUTH_PROVIDERS},late`,
    OAUTH_LATE_ISSUER: `http://127.0.0.1:${latePort}`,
    OAUTH_LATE_CLIENT_ID: 'late-client',
    OAUTH_LATE_CLIENT_SECRET: 'late-secret',
  });
});
afterAll(async () => {
  await ctx?.close();
  await providers?.close();
  await late?.close();
});

const sha256url = (text: string): string => createHash('sha256').update(text).digest('base64url');

/** A fresh account name at every provider (the providers' accounts are maps the tests fill). */
function account(options: { email?: string; verified?: boolean | 'absent'; preferred?: string } = {}): { id: string; email: string } {
  const id = uniqueName('acct');
  const email = options.email ?? `${id}@provider.test`;
  const verified = options.verified ?? true;
  const claims = { email, ...(verified === 'absent' ? {} : { email_verified: verified }), ...(options.preferred === undefined ? {} : { preferred_username: options.preferred }) };
  providers.op.accounts.set(id, claims);
  providers.formPost.accounts.set(id, claims);
  providers.rogue.accounts.set(id, { sub: `rogue-${id}`, ...claims });
  providers.github.accounts.set(id, {
    id: 1_000_000 + providers.github.accounts.size,
    login: options.preferred ?? id,
    emails: [{ email, primary: true, verified: verified === true }],
  });
  return { id, email };
}

async function countRows(table: 'users' | 'user_identities' | 'oauth_flows'): Promise<number> {
  const { rows } = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return rows[0]!.n;
}

async function userByEmail(email: string) {
  const { rows } = await ctx.db.query<{ id: string; username: string; password_hash: string | null; is_email_verified: boolean; phone: string | null }>(
    'SELECT id, username, password_hash, is_email_verified, phone FROM users WHERE email = $1',
    [email],
  );
  return rows[0];
}

async function identitiesOf(userId: string) {
  const { rows } = await ctx.db.query<{ provider: string; issuer: string; subject: string; email: string | null; last_sign_in_at: Date | null }>(
    'SELECT provider, issuer, subject, email, last_sign_in_at FROM user_identities WHERE user_id = $1 ORDER BY created_at',
    [userId],
  );
  return rows;
}

/** GET authorize through the service only (no provider): its answer. */
function authorize(provider: string, query = '') {
  return ctx.app.inject({ method: 'GET', url: `/auth/v0/oauth/${provider}/authorize${query}` });
}

/** A flow started and run at the provider, stopped before the callback: the callback URL and the browser holding the flow cookie. */
async function flowUpToCallback(provider: string, who: string): Promise<{ browser: TestBrowser; callback: string }> {
  const browser = browserAs(ctx, providers, who);
  await browser.navigate(`${PUBLIC_URL}/auth/v0/oauth/${provider}/authorize`, { account: who, stopBefore: (url) => url.href.startsWith(callbackUrl(provider)) });
  expect(browser.stoppedAt).toBeDefined();
  return { browser, callback: browser.stoppedAt! };
}

describe('GET /auth/v0/oauth/providers', () => {
  it('lists every configured provider in configured order, a failing one included, with its name', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/oauth/providers' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      providers: [
        { id: 'op', name: 'Test OP' },
        { id: 'formpost', name: 'formpost' },
        { id: 'rogue', name: 'rogue' },
        { id: 'github', name: 'GitHub' },
        { id: 'late', name: 'late' },
      ],
    });
  });
});

describe('GET /auth/v0/oauth/{provider}/authorize', () => {
  it('302 to the provider with PKCE S256, state and nonce; sets oauth_flow (HttpOnly, Secure, SameSite=Lax, Path=/auth/v0/oauth, 600 s), a secret that is not the state; stores only hashes', async () => {
    const res = await authorize('op');
    expect(res.statusCode).toBe(302);
    expect(res.headers['cache-control']).toBe('no-store');
    const location = new URL(String(res.headers.location));
    expect(location.origin).toBe(providers.op.issuer);
    const q = location.searchParams;
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe(providers.op.clientId);
    expect(q.get('redirect_uri')).toBe(callbackUrl('op'));
    expect(q.get('scope')).toBe('openid email profile');
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('state')).toMatch(/^[A-Za-z0-9_-]{22,}$/);
    expect(q.get('nonce')).toMatch(/^[A-Za-z0-9_-]{22,}$/);
    const [cookie] = setCookies(res);
    expect(cookie).toMatchObject({ name: 'oauth_flow', attributes: { path: '/auth/v0/oauth', httponly: true, secure: true, samesite: 'Lax', 'max-age': '600' } });
    expect(cookie!.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(cookie!.value).not.toBe(q.get('state'));
    const { rows } = await ctx.db.query<Record<string, unknown>>('SELECT * FROM oauth_flows WHERE state_hash = $1', [sha256url(q.get('state')!)]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ provider: 'op', browser_hash: sha256url(cookie!.value), redirect_to: APP_PAGE, mode: 'sign_in', user_id: null, consumed_at: null });
    expect(JSON.stringify(rows[0])).not.toContain(q.get('state'));
    expect(JSON.stringify(rows[0])).not.toContain(cookie!.value);
    // The PKCE challenge is the S256 of the stored verifier (RFC 7636 §4.2).
    expect(sha256url(rows[0]!.code_verifier as string)).toBe(q.get('code_challenge'));
  });

  it('GitHub: the explicit endpoint, its scopes, PKCE, no nonce', async () => {
    const res = await authorize('github');
    expect(res.statusCode).toBe(302);
    const location = new URL(String(res.headers.location));
    expect(`${location.origin}${location.pathname}`).toBe(`${providers.github.url}/login/oauth/authorize`);
    expect(location.searchParams.get('scope')).toBe('read:user user:email');
    expect(location.searchParams.get('code_challenge_method')).toBe('S256');
    expect(location.searchParams.has('nonce')).toBe(false);
  });

  it('404 auth.oauth.unknown_provider for an id that names no configured provider; no cookie, no flow', async () => {
    const before = await countRows('oauth_flows');
    for (const id of ['google', 'OP', 'op%2F..', 'x'.repeat(64)]) {
      const res = await authorize(id);
      expect(res.statusCode, id).toBe(404);
      expect(res.json()).toMatchObject({ code: 'auth.oauth.unknown_provider' });
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    expect(await countRows('oauth_flows')).toBe(before);
  });

  it('400 auth.oauth.invalid_redirect for every redirect_to not under an entry of OAUTH_REDIRECT_URLS; no cookie, no flow', async () => {
    const before = await countRows('oauth_flows');
    const refused = [
      'https://evil.example/welcome', // another host
      'https://app.example.test.evil.example/welcome', // a host that starts with the allowed one
      'https://app.example.test:8443/welcome', // another port
      'http://app.example.test/welcome', // another scheme
      'https://app.example.test/welcomeback', // a path that starts with the allowed one, not at a / boundary
      'https://app.example.test/welcome/../admin', // dot segments that leave the path
      'https://app.example.test/welcome/%2e%2e/admin',
      'https://user@app.example.test/welcome', // user info
      'https://user:pw@app.example.test/welcome',
      'https://@app.example.test/welcome',
      'https://app.example.test@evil.example/welcome',
      'https://app.example.test/welcome#x', // a fragment
      'https://app.example.test/welcome#',
      '/welcome', // not absolute
      '//evil.example/welcome',
      'javascript:alert(1)//https://app.example.test/welcome',
      'https://app.example.test\\@evil.example/welcome',
      `https://app.example.test/welcome/${'a'.repeat(2048)}`,
    ];
    for (const target of refused) {
      const res = await authorize('op', `?redirect_to=${encodeURIComponent(target)}`);
      expect(res.statusCode, target).toBe(400);
      expect(res.json(), target).toMatchObject({ code: expect.stringMatching(/^auth\.oauth\.(invalid_redirect|validation_failed)$/) });
      expect(res.headers['set-cookie'], target).toBeUndefined();
    }
    expect(await countRows('oauth_flows')).toBe(before);
    const repeated = await authorize('op', `?redirect_to=${encodeURIComponent(APP_PAGE)}&redirect_to=${encodeURIComponent(APP_PAGE)}`);
    expect(repeated.statusCode).toBe(400);
  });

  it('accepts the entries themselves, paths under them with a query, and the default (the first entry)', async () => {
    for (const [target, stored] of [
      [SETTINGS_PAGE, SETTINGS_PAGE],
      [`${APP_PAGE}/next?x=1&y=%2F`, `${APP_PAGE}/next?x=1&y=%2F`],
      ['HTTPS://APP.example.test:443/welcome', APP_PAGE],
      [undefined, APP_PAGE],
    ] as const) {
      const res = await authorize('op', target === undefined ? '' : `?redirect_to=${encodeURIComponent(target)}`);
      expect(res.statusCode, target).toBe(302);
      const state = new URL(String(res.headers.location)).searchParams.get('state')!;
      const { rows } = await ctx.db.query<{ redirect_to: string }>('SELECT redirect_to FROM oauth_flows WHERE state_hash = $1', [sha256url(state)]);
      expect(rows[0]!.redirect_to).toBe(stored);
    }
  });

  it('503 auth.oauth.provider_unavailable while discovery fails (the service started anyway); retried with backoff, it works once the provider is up', async () => {
    const down = await authorize('late');
    expect(down.statusCode).toBe(503);
    expect(down.json()).toMatchObject({ code: 'auth.oauth.provider_unavailable' });
    expect(down.headers['set-cookie']).toBeUndefined();
    late = await startRogueProvider(callbackUrl('late'), { port: latePort, clientId: 'late-client' });
    // Within the backoff a request does not call the provider again.
    expect((await authorize('late')).statusCode).toBe(503);
    ctx.clock.advance(DISCOVERY_BACKOFF_SECONDS);
    const up = await authorize('late');
    expect(up.statusCode, up.body).toBe(302);
    expect(String(up.headers.location)).toContain(`http://127.0.0.1:${latePort}/authorize?`);
  });
});

/** More than the first waits after failed discoveries (2 s, then 4 s, ...), so the next request tries again. */
const DISCOVERY_BACKOFF_SECONDS = 60;

describe('callback refusals: 400 auth.oauth.invalid_state, JSON, no redirect, nothing changes', () => {
  it('without the flow cookie; with another browser\'s; after all that, the right browser still completes', async () => {
    const who = account();
    const { browser, callback } = await flowUpToCallback('rogue', who.id);
    const strangerFlow = await authorize('rogue');
    const strangerCookie = setCookies(strangerFlow)[0]!.value;
    for (const cookie of [undefined, '', strangerCookie, browser.cookie(PUBLIC_URL, 'oauth_flow')!.slice(1)]) {
      const res = await ctx.app.inject({ method: 'GET', url: callback.slice(PUBLIC_URL.length), headers: cookie === undefined ? {} : { cookie: `oauth_flow=${cookie}` } });
      expect(res.statusCode, cookie).toBe(400);
      expect(res.json()).toEqual({ code: 'auth.oauth.invalid_state', message: expect.any(String) });
      expect(res.headers.location).toBeUndefined();
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    expect(await userByEmail(who.email)).toBeUndefined();
    const end = await runFlow(browser, callback);
    expectLanding(end, APP_PAGE);
  });

  it('a state that is tampered with, repeated, missing, or another provider\'s (the cookie is bound to the provider that issued it)', async () => {
    const who = account();
    const { browser, callback } = await flowUpToCallback('rogue', who.id);
    const url = new URL(callback);
    const state = url.searchParams.get('state')!;
    const cookie = `oauth_flow=${browser.cookie(PUBLIC_URL, 'oauth_flow')!}`;
    const variants = [
      callback.replace(`state=${state}`, `state=${state.slice(0, -1)}${state.endsWith('A') ? 'B' : 'A'}`),
      `${callback}&state=${state}`,
      callback.replace(`state=${state}`, ''),
      callback.replace('/oauth/rogue/', '/oauth/op/'),
      callback.replace('/oauth/rogue/', '/oauth/github/'),
    ];
    for (const variant of variants) {
      const res = await ctx.app.inject({ method: 'GET', url: variant.slice(PUBLIC_URL.length), headers: { cookie } });
      expect(res.statusCode, variant).toBe(400);
      expect(res.json()).toMatchObject({ code: 'auth.oauth.invalid_state' });
    }
    const unknown = await ctx.app.inject({ method: 'GET', url: callback.slice(PUBLIC_URL.length).replace('/oauth/rogue/', '/oauth/nope/'), headers: { cookie } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ code: 'auth.oauth.unknown_provider' });
    // Still unconsumed: the real callback completes.
    expectLanding(await runFlow(browser, callback), APP_PAGE);
  });

  it('a replayed callback (the flow was used) and an expired flow (600 s)', async () => {
    const who = account();
    const { browser, callback } = await flowUpToCallback('rogue', who.id);
    const cookie = `oauth_flow=${browser.cookie(PUBLIC_URL, 'oauth_flow')!}`;
    const first = await ctx.app.inject({ method: 'GET', url: callback.slice(PUBLIC_URL.length), headers: { cookie } });
    expect(first.statusCode).toBe(303);
    // The flow cookie is cleared: empty, Max-Age=0, same path and attributes.
    expect(setCookies(first).find((c) => c.name === 'oauth_flow')).toMatchObject({ value: '', attributes: { path: '/auth/v0/oauth', 'max-age': '0', httponly: true, secure: true, samesite: 'Lax' } });
    const replay = await ctx.app.inject({ method: 'GET', url: callback.slice(PUBLIC_URL.length), headers: { cookie } });
    expect(replay.statusCode).toBe(400);
    expect(replay.json()).toMatchObject({ code: 'auth.oauth.invalid_state' });

    const second = await flowUpToCallback('rogue', who.id);
    ctx.clock.advance(601);
    const expired = await ctx.app.inject({ method: 'GET', url: second.callback.slice(PUBLIC_URL.length), headers: { cookie: `oauth_flow=${second.browser.cookie(PUBLIC_URL, 'oauth_flow')!}` } });
    expect(expired.statusCode).toBe(400);
    expect(expired.json()).toMatchObject({ code: 'auth.oauth.invalid_state' });
  });
});

describe('callback failures: 303 to redirect_to with error=<code>; the flow is used up', () => {
  it('auth.oauth.provider_error: the user declined at the provider; the page\'s own query is kept, an error of its own replaced', async () => {
    const who = account();
    const browser = browserAs(ctx, providers, who.id);
    browser.setCookie(providers.github.url, 'gh_deny', '1');
    const page = `${SETTINGS_PAGE}?tab=security&error=stale`;
    const end = await signInWith(browser, 'github', { redirectTo: page });
    expectLanding(end, SETTINGS_PAGE, 'auth.oauth.provider_error');
    expect(end.location!.searchParams.get('tab')).toBe('security');
    expect(end.location!.searchParams.getAll('error')).toEqual(['auth.oauth.provider_error']);
    expect(setCookies({ headers: { 'set-cookie': end.last.setCookies } } as never).map((c) => c.name)).toEqual(['oauth_flow']);
    // Used up: the same callback again is invalid_state.
    const again = await ctx.app.inject({ method: 'GET', url: end.last.url.slice(PUBLIC_URL.length), headers: { cookie: `oauth_flow=${end.hops[0]!.setCookies[0]!.split(';')[0]!.split('=')[1]}` } });
    expect(again.statusCode).toBe(400);
  });

  it('auth.oauth.invalid_response: an ID token with a wrong nonce, audience or issuer, a foreign signature, expired; an iss parameter missing or wrong (RFC 9207); nothing is created', async () => {
    const users = await countRows('users');
    const faults = [{ wrongNonce: true }, { wrongAudience: true }, { wrongIssuer: true }, { foreignKey: true }, { expired: true }, { issParam: 'missing' }, { issParam: 'wrong' }] as const;
    for (const fault of faults) {
      const who = account();
      Object.assign(providers.rogue.faults, fault);
      try {
        const end = await signInWith(browserAs(ctx, providers, who.id), 'rogue');
        expect(end.location?.searchParams.get('error'), JSON.stringify(fault)).toBe('auth.oauth.invalid_response');
        expectLanding(end, APP_PAGE, 'auth.oauth.invalid_response');
        expect(end.last.setCookies.some((c) => c.startsWith('refresh_token='))).toBe(false);
      } finally {
        for (const key of Object.keys(fault)) delete (providers.rogue.faults as Record<string, unknown>)[key];
      }
    }
    expect(await countRows('users')).toBe(users);
    // The same provider, behaving, signs in.
    const who = account();
    expectLanding(await signInWith(browserAs(ctx, providers, who.id), 'rogue'), APP_PAGE);
  });

  it('auth.oauth.provider_unavailable: the token endpoint answers 5xx or hangs up; GitHub\'s token endpoint or API answers 5xx', async () => {
    const cases: [string, () => void, () => void][] = [
      ['rogue', () => (providers.rogue.faults.tokenStatus = 502), () => delete providers.rogue.faults.tokenStatus],
      ['rogue', () => (providers.rogue.faults.tokenHangUp = true), () => delete providers.rogue.faults.tokenHangUp],
      ['github', () => (providers.github.faults.tokenStatus = 503), () => delete providers.github.faults.tokenStatus],
      ['github', () => (providers.github.faults.userStatus = 500), () => delete providers.github.faults.userStatus],
    ];
    for (const [provider, set, unset] of cases) {
      const who = account();
      set();
      try {
        expectLanding(await signInWith(browserAs(ctx, providers, who.id), provider), APP_PAGE, 'auth.oauth.provider_unavailable');
      } finally {
        unset();
      }
      expect(await userByEmail(who.email)).toBeUndefined();
    }
  });

  it('auth.oauth.invalid_response: a token endpoint that refuses the code (4xx)', async () => {
    providers.rogue.faults.tokenStatus = 400;
    try {
      expectLanding(await signInWith(browserAs(ctx, providers, account().id), 'rogue'), APP_PAGE, 'auth.oauth.invalid_response');
    } finally {
      delete providers.rogue.faults.tokenStatus;
    }
  });

  it('auth.oauth.email_not_verified: email_verified false or absent (OpenID), no primary verified address (GitHub); nothing is created', async () => {
    const users = await countRows('users');
    for (const [provider, verified] of [['rogue', false], ['rogue', 'absent'], ['op', false], ['github', false]] as const) {
      const who = account({ verified });
      expectLanding(await signInWith(browserAs(ctx, providers, who.id), provider, { account: who.id }), APP_PAGE, 'auth.oauth.email_not_verified');
    }
    expect(await countRows('users')).toBe(users);
  });
});

describe('sign-up and sign-in through a provider', () => {
  it('oidc-provider: a new user with the verified email, no phone, no password, a derived username, no verification email; a session with amr ["oauth"] that refresh continues', async () => {
    const who = account({ preferred: 'Alice.Liddell' });
    const browser = browserAs(ctx, providers, who.id);
    const end = await signInWith(browser, 'op', { account: who.id, redirectTo: `${APP_PAGE}?from=button` });
    expectLanding(end, APP_PAGE);
    expect(end.location!.search).toBe('?from=button');
    // No token and no code in the redirect.
    expect(end.location!.href).toBe(`${APP_PAGE}?from=button`);
    const refreshCookie = end.last.setCookies.find((c) => c.startsWith('refresh_token='))!;
    expect(refreshCookie).toMatch(/Path=\/auth\/v0\/refresh; HttpOnly; Secure; SameSite=Strict/);
    const user = (await userByEmail(who.email))!;
    expect(user).toMatchObject({ is_email_verified: true, password_hash: null, phone: null });
    expect(user.username).toMatch(/^alice_liddell(_\d{4})?$/);
    const session = await refreshIn(browser);
    expect(session.status).toBe(200);
    expect(claimsOf(session.accessToken!)).toMatchObject({ sub: user.id, amr: ['oauth'] });
    const me = await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken!);
    expect(me.json()).toMatchObject({ user: { id: user.id, email: who.email, phone: null, is_email_verified: true, is_phone_verified: false } });
    const { rows } = await ctx.db.query('SELECT kind FROM email_outbox WHERE recipient = $1', [who.email]);
    expect(rows).toEqual([]);
    const identities = await identitiesOf(user.id);
    expect(identities).toEqual([{ provider: 'op', issuer: providers.op.issuer, subject: who.id, email: who.email, last_sign_in_at: expect.any(Date) }]);
    // A password sign-in of a user without a password fails as a wrong password does.
    const pwd = await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: PASSWORD });
    expect(pwd.statusCode).toBe(401);
    expect(pwd.json()).toMatchObject({ code: 'auth.invalid_credentials' });
    // The second sign-in is the same user: nothing is created.
    const users = await countRows('users');
    const again = browserAs(ctx, providers, who.id);
    expectLanding(await signInWith(again, 'op', { account: who.id }), APP_PAGE);
    expect(await countRows('users')).toBe(users);
    expect(await identitiesOf(user.id)).toHaveLength(1);
    expect(claimsOf((await refreshIn(again)).accessToken!)).toMatchObject({ sub: user.id });
  });

  it('form_post: the POST callback answers 303 to the GET with the same parameters (no cookie needed), which signs in', async () => {
    const who = account();
    const browser = browserAs(ctx, providers, who.id);
    const end = await signInWith(browser, 'formpost', { account: who.id });
    expectLanding(end, APP_PAGE);
    const post = end.hops.find((h) => h.url === callbackUrl('formpost') && h.status === 303)!;
    expect(post).toBeDefined();
    const next = new URL(String(post.headers.location));
    expect(`${next.origin}${next.pathname}`).toBe(callbackUrl('formpost'));
    expect([...next.searchParams.keys()].sort()).toEqual(['code', 'iss', 'state']);
    expect(post.setCookies).toEqual([]);
    expect(await userByEmail(who.email)).toMatchObject({ is_email_verified: true });
    const bare = await ctx.app.inject({ method: 'POST', url: '/auth/v0/oauth/formpost/callback', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'state=a&state=b&code=c' });
    expect(bare.statusCode).toBe(303);
    expect(bare.headers.location).toBe(`${callbackUrl('formpost')}?state=a&state=b&code=c`);
    const unknown = await ctx.app.inject({ method: 'POST', url: '/auth/v0/oauth/nope/callback', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'state=a' });
    expect(unknown.statusCode).toBe(404);
  });

  it('GitHub: the numeric id is the subject, the primary verified email the address, the login the username; the token request proved PKCE', async () => {
    const who = account({ preferred: uniqueName('Octo-Cat') });
    providers.github.accounts.get(who.id)!.emails.unshift({ email: `other-${who.email}`, primary: false, verified: true });
    const browser = browserAs(ctx, providers, who.id);
    const requests = providers.github.tokenRequests.length;
    expectLanding(await signInWith(browser, 'github'), APP_PAGE);
    expect(providers.github.tokenRequests.slice(requests)).toEqual([{ pkce: true }]);
    const user = (await userByEmail(who.email))!;
    expect(user.username).toBe(providers.github.accounts.get(who.id)!.login.toLowerCase().replace(/-/g, '_'));
    expect(await identitiesOf(user.id)).toEqual([
      { provider: 'github', issuer: providers.github.url, subject: String(providers.github.accounts.get(who.id)!.id), email: who.email, last_sign_in_at: expect.any(Date) },
    ]);
    expect(claimsOf((await refreshIn(browser)).accessToken!)).toMatchObject({ amr: ['oauth'] });
  });

  it('usernames: a taken one gets _ and 4 digits; no preferred_username: the email\'s local part; short ones are padded with digits', async () => {
    const taken = await createVerifiedUser(ctx);
    const first = account({ preferred: taken.username });
    expectLanding(await signInWith(browserAs(ctx, providers, first.id), 'rogue'), APP_PAGE);
    expect((await userByEmail(first.email))!.username).toMatch(new RegExp(`^${taken.username.slice(0, 27)}_\\d{4}$`));
    const local = account({ email: `Mr.Ünïcode+tag-${uniqueName('x')}@provider.test` });
    expectLanding(await signInWith(browserAs(ctx, providers, local.id), 'rogue'), APP_PAGE);
    expect((await userByEmail(local.email.toLowerCase()))!.username).toMatch(/^mr__n_code_tag_x_[0-9a-f]{10}$/);
    const short = account({ preferred: 'Q' });
    expectLanding(await signInWith(browserAs(ctx, providers, short.id), 'rogue'), APP_PAGE);
    expect((await userByEmail(short.email))!.username).toMatch(/^q\d{2}(_\d{4})?$/);
    const long = account({ preferred: 'x'.repeat(40) });
    expectLanding(await signInWith(browserAs(ctx, providers, long.id), 'rogue'), APP_PAGE);
    expect((await userByEmail(long.email))!.username).toMatch(/^(x{32}|x{27}_\d{4})$/);
  });
});

describe('existing local accounts: nothing is linked (auth.oauth.account_exists)', () => {
  it('a verified account with the provider\'s email: refused, no identity; the owner signs in as before', async () => {
    const owner = await createVerifiedUser(ctx);
    const who = account({ email: owner.email });
    expectLanding(await signInWith(browserAs(ctx, providers, who.id), 'op', { account: who.id }), APP_PAGE, 'auth.oauth.account_exists');
    expect(await identitiesOf(owner.id)).toEqual([]);
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: owner.username, password: PASSWORD })).statusCode).toBe(200);
  });

  it('the pre-registration takeover fails: an attacker signs up with the victim\'s address (unverified); the victim\'s provider sign-in links nothing, verifies nothing, signs nobody in', async () => {
    const victimEmail = `${uniqueName('victim')}@provider.test`;
    const attacker = await signUp(ctx, { email: victimEmail, password: 'attacker chosen password 1' });
    expect(attacker.res.statusCode).toBe(201);
    const victim = account({ email: victimEmail });
    const browser = browserAs(ctx, providers, victim.id);
    const end = await signInWith(browser, 'op', { account: victim.id });
    expectLanding(end, APP_PAGE, 'auth.oauth.account_exists');
    expect(end.last.setCookies.some((c) => c.startsWith('refresh_token='))).toBe(false);
    expect(await identitiesOf(attacker.body.user.id)).toEqual([]);
    expect(await userByEmail(victimEmail)).toMatchObject({ id: attacker.body.user.id, is_email_verified: false });
    // The attacker's password still meets the unverified address, not an account with the victim's identity.
    const pwd = await postJson(ctx, '/auth/v0/sign-in', { email: victimEmail, password: 'attacker chosen password 1' });
    expect(pwd.statusCode).toBe(403);
    expect(pwd.json()).toMatchObject({ code: 'auth.email_not_verified' });
    expect((await refreshIn(browser)).status).toBe(401);
  });
});

describe('the rules of every sign-in', () => {
  it('a banned user: error=auth.user_banned, no session', async () => {
    const who = account();
    expectLanding(await signInWith(browserAs(ctx, providers, who.id), 'rogue'), APP_PAGE);
    const user = (await userByEmail(who.email))!;
    await banUser(ctx.db, user.id, { until: null, reason: 'test' }, ctx.clock.now());
    const browser = browserAs(ctx, providers, who.id);
    const end = await signInWith(browser, 'rogue');
    expectLanding(end, APP_PAGE, 'auth.user_banned');
    expect(end.last.setCookies.some((c) => c.startsWith('refresh_token='))).toBe(false);
    expect((await refreshIn(browser)).status).toBe(401);
  });

  it('an unverified email of a known identity: error=auth.email_not_verified, as password sign-in answers', async () => {
    const who = account();
    expectLanding(await signInWith(browserAs(ctx, providers, who.id), 'rogue'), APP_PAGE);
    await ctx.db.query('UPDATE users SET is_email_verified = false WHERE email = $1', [who.email]);
    expectLanding(await signInWith(browserAs(ctx, providers, who.id), 'rogue'), APP_PAGE, 'auth.email_not_verified');
  });

  it('a second factor: error=auth.mfa_required and the mfa_challenge cookie, no session; the second step signs in with amr ["oauth","otp"]', async () => {
    const who = account();
    const browser = browserAs(ctx, providers, who.id);
    expectLanding(await signInWith(browser, 'rogue'), APP_PAGE);
    const { accessToken } = await refreshIn(browser);
    // A user without a password turns TOTP on with a recent sign-in instead of the password.
    const setup = await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', accessToken!, {});
    expect(setup.statusCode, setup.body).toBe(200);
    const { secret } = setup.json() as { secret: string };
    expect((await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/enable', accessToken!, { code: codeNow(ctx, secret) })).statusCode).toBe(200);
    nextStep(ctx);
    const again = browserAs(ctx, providers, who.id);
    const end = await signInWith(again, 'rogue');
    expectLanding(end, APP_PAGE, 'auth.mfa_required');
    expect(end.last.setCookies.some((c) => c.startsWith('refresh_token='))).toBe(false);
    const challenge = setCookies({ headers: { 'set-cookie': end.last.setCookies } } as never).find((c) => c.name === 'mfa_challenge')!;
    expect(challenge.attributes).toMatchObject({ path: '/auth/v0/sign-in/mfa', httponly: true, secure: true, samesite: 'Strict', 'max-age': '300' });
    const step = await secondStep(ctx, challenge.value, { code: codeNow(ctx, secret) });
    expect(step.statusCode, step.body).toBe(200);
    expect(claimsOf((step.json() as { tokens: { access_token: string } }).tokens.access_token)).toMatchObject({ amr: ['oauth', 'otp'] });
  });
});

describe('flows live in the database', () => {
  it('the retention worker deletes flows once expired, used or not', async () => {
    await authorize('op');
    expect(await countRows('oauth_flows')).toBeGreaterThan(0);
    ctx.clock.advance(601);
    const report = await ctx.app.retention.runOnce();
    expect(report.oauthFlows).toBeGreaterThan(0);
    expect(await countRows('oauth_flows')).toBe(0);
  });

  it('no secret reaches the log: codes, states, flow cookies, client secrets, tokens', async () => {
    const who = account();
    const browser = browserAs(ctx, providers, who.id);
    const end = await signInWith(browser, 'op', { account: who.id });
    expectLanding(end, APP_PAGE);
    const callback = new URL(end.last.url);
    const log = ctx.rawLogs.join('\n');
    for (const secret of [callback.searchParams.get('code')!, callback.searchParams.get('state')!, end.hops[0]!.setCookies[0]!.split(';')[0]!.split('=')[1]!, providers.op.clientSecret, providers.rogue.clientSecret, providers.github.clientSecret]) {
      expect(log).not.toContain(secret);
    }
    expect(ctx.logs.some((l) => l.event === 'oauth.failed')).toBe(true);
  });

  it('notices: none for a sign-up or sign-in through a provider', async () => {
    const who = account();
    expectLanding(await signInWith(browserAs(ctx, providers, who.id), 'rogue'), APP_PAGE);
    expect(await noticesTo(ctx, who.email)).toEqual([]);
  });
});
