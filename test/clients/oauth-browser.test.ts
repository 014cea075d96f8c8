/**
 * Sign-in with an identity provider in a real browser (Chromium), through @latchkey/client on
 * an app page served with the service on one origin (docs/integration.md#sign-in-with-an-identity-provider):
 * the button's navigation, the provider's own sign-in and consent pages (oidc-provider, typed
 * into by the browser), the return signed in, a refresh, linking a second provider (the
 * GitHub-compatible server), unlinking, and an error read from the return address.
 */
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGithubServer, type TestGithubServer } from '../helpers/github-server.js';
import { startOpenIdProvider, type TestOpenIdProvider } from '../helpers/oidc-provider.js';
import { CHROMIUM, CHROMIUM_ARGS, freePort, SKIP_BROWSER, startFrontDoor, type FrontDoor } from './browser-harness.js';

type Outcome = { ok: unknown; error?: undefined } | { ok?: undefined; error: { code: string; status: number } };

describe.skipIf(SKIP_BROWSER)('identity providers in Chromium, through @latchkey/client', () => {
  let door: FrontDoor;
  let op: TestOpenIdProvider;
  let github: TestGithubServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let origin: string;

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://localhost:${port}`;
    [op, github] = await Promise.all([startOpenIdProvider([`${origin}/auth/v0/oauth/op/callback`]), startGithubServer(`${origin}/auth/v0/oauth/github/callback`)]);
    op.accounts.set('alice', { email: 'alice@provider.test', email_verified: true, preferred_username: 'alice' });
    op.accounts.set('bob', { email: 'bob@provider.test', email_verified: true, preferred_username: 'bob' });
    github.accounts.set('octo', { id: 583231, login: 'octocat', emails: [{ email: 'octo@provider.test', primary: true, verified: true }] });
    github.accounts.set('hubot', { id: 583232, login: 'hubot', emails: [{ email: 'hubot@provider.test', primary: true, verified: true }] });
    door = await startFrontDoor(
      {
        PUBLIC_URL: origin,
        OAUTH_PROVIDERS: 'op,github',
        OAUTH_OP_ISSUER: op.issuer,
        OAUTH_OP_CLIENT_ID: op.clientId,
        OAUTH_OP_CLIENT_SECRET: op.clientSecret,
        OAUTH_OP_NAME: 'Local OP',
        OAUTH_GITHUB_URL: github.url,
        OAUTH_GITHUB_API_URL: github.apiUrl,
        OAUTH_GITHUB_CLIENT_ID: github.clientId,
        OAUTH_GITHUB_CLIENT_SECRET: github.clientSecret,
        OAUTH_REDIRECT_URLS: `${origin}/app/,${origin}/auth/v0/demo`,
        DEMO_PAGE: 'true',
      },
      { port },
    );
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    context = await browser.newContext();
    page = await context.newPage();
    await page.goto(`${origin}/app/`);
    expect(await page.evaluate<boolean>('window.client.ready')).toBe(false);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await door?.close();
    await op?.close();
    await github?.close();
  });

  const run = (name: string, ...args: unknown[]): Promise<Outcome> => page.evaluate(([o, a]) => (globalThis as unknown as { run(op: string, ...args: unknown[]): Promise<Outcome> }).run(o, ...a), [name, args] as const);
  /**
   * Waits for the app page to load again at `/app/<search>` after a navigation away (each return
   * below has a query of its own, so the page it left is never mistaken for it), then for its
   * client's session restore.
   */
  const backOnApp = async (search: string): Promise<boolean> => {
    await page.waitForURL((url) => url.origin === origin && url.pathname === '/app/' && url.search === search, { timeout: 15_000, waitUntil: 'load' });
    return page.evaluate<boolean>('window.client.ready');
  };
  const amrOf = async (): Promise<unknown> => {
    const token = await page.evaluate<string>('window.client.accessToken()');
    return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { amr: unknown }).amr;
  };

  it('the button, the provider\'s pages, back signed in (amr oauth), a refresh; link GitHub, list, unlink; an error read from the return address', async () => {
    expect(await run('providers')).toEqual({ ok: { providers: [{ id: 'op', name: 'Local OP' }, { id: 'github', name: 'GitHub' }] } });

    // "Sign in with Local OP": a navigation to the service, then the provider's sign-in page.
    await page.evaluate((back) => (globalThis as unknown as { client: { signInWithProvider(id: string, o: object): void } }).client.signInWithProvider('op', { redirectTo: back }), `${origin}/app/?from=op`);
    await page.waitForURL((url) => url.origin === op.issuer && url.pathname.startsWith('/interaction/'));
    await page.fill('input[name="login"]', 'alice');
    await page.fill('input[name="password"]', 'any password');
    await page.click('button[type="submit"]');
    // The consent page of the development interactions.
    await page.waitForURL((url) => url.origin === op.issuer && url.pathname.startsWith('/interaction/'));
    await page.click('button[type="submit"]');
    expect(await backOnApp('?from=op')).toBe(true);
    expect(await page.evaluate<string | null>('window.client.readProviderError()')).toBeNull();
    const me = (await run('me')).ok as { user: { username: string; email: string; is_email_verified: boolean } };
    expect(me.user).toMatchObject({ username: 'alice', email: 'alice@provider.test', is_email_verified: true });
    expect(await amrOf()).toEqual(['oauth']);
    expect(await run('refresh')).toEqual({ ok: true });

    // Link GitHub: the test GitHub reads who is signed in there from its own cookie.
    await context.addCookies([{ name: 'gh_user', value: 'octo', url: github.url }]);
    await page.evaluate((back) => (globalThis as unknown as { client: { linkProvider(id: string, o: object): Promise<void> } }).client.linkProvider('github', { redirectTo: back }), `${origin}/app/?tab=identities`);
    expect(await backOnApp('?tab=identities')).toBe(true);
    const listed = ((await run('identities')).ok as { identities: { id: string; provider: string; email: string }[] }).identities;
    expect(listed.map((i) => [i.provider, i.email])).toEqual([
      ['op', 'alice@provider.test'],
      ['github', 'octo@provider.test'],
    ]);
    expect(await run('unlinkIdentity', listed[0]!.id)).toEqual({ ok: null });
    expect(await run('unlinkIdentity', listed[1]!.id)).toMatchObject({ error: { code: 'auth.identities.last_sign_in_method', status: 409 } });

    // A refusal at GitHub comes back as ?error=, which the client reads and removes.
    await context.addCookies([{ name: 'gh_deny', value: '1', url: github.url }]);
    await page.evaluate((back) => (globalThis as unknown as { client: { signInWithProvider(id: string, o: object): void } }).client.signInWithProvider('github', { redirectTo: back }), `${origin}/app/`);
    await backOnApp('?error=auth.oauth.provider_error');
    expect(await page.evaluate<string | null>('window.client.readProviderError()')).toBe('auth.oauth.provider_error');
    expect(new URL(page.url()).search).toBe('');
  });

  it('the demo page: a button per provider, the provider\'s pages, back signed in; the providers card links GitHub, lists, unlinks; refresh', async () => {
    const demo = await (await browser.newContext()).newPage();
    await demo.goto(`${origin}/auth/v0/demo`);
    await demo.click('button.provider-sign-in[data-provider="op"]');
    await demo.waitForURL((url) => url.origin === op.issuer && url.pathname.startsWith('/interaction/'));
    await demo.fill('input[name="login"]', 'bob');
    await demo.fill('input[name="password"]', 'any password');
    await demo.click('button[type="submit"]');
    await demo.waitForURL((url) => url.origin === op.issuer && url.pathname.startsWith('/interaction/'));
    await demo.click('button[type="submit"]');
    await demo.waitForURL(`${origin}/auth/v0/demo`);
    await demo.waitForSelector('#state[data-signed-in="true"]');
    // The page shows "Signed in" at once and the user's name once its /me answers.
    await expect.poll(() => demo.textContent('#state')).toContain('bob (bob@provider.test)');

    await demo.context().addCookies([{ name: 'gh_user', value: 'hubot', url: github.url }]);
    await demo.click('button.provider-link[data-provider="github"]');
    await demo.waitForURL((url) => url.origin === origin && url.pathname === '/auth/v0/demo', { waitUntil: 'load' });
    await demo.waitForSelector('#state[data-signed-in="true"]');
    await demo.click('#identities');
    await demo.waitForSelector('#identities-table:not([hidden])');
    const rows = async () => demo.$$eval('#identities-list tr td[data-label="provider"]', (cells) => cells.map((c) => c.textContent));
    expect(await rows()).toEqual(['op (bob@provider.test)', 'github (hubot@provider.test)']);
    await demo.click('#identities-list tr:first-child button.unlink');
    // (The page's Content-Security-Policy allows no evaluated strings: poll through the locator.)
    await expect.poll(() => demo.locator('#identities-list tr').count()).toBe(1);
    expect(await rows()).toEqual(['github (hubot@provider.test)']);
    await demo.click('#refresh');
    await demo.waitForSelector('#notice[data-outcome="success"]');
    await demo.context().close();
  });
});
