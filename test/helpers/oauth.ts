import { expect } from 'vitest';
import type { TestContext } from './context.js';
import { startGithubServer, type TestGithubServer } from './github-server.js';
import { TestBrowser, type BrowserResponse } from './oauth-browser.js';
import { startOpenIdProvider, type TestOpenIdProvider } from './oidc-provider.js';
import { startRogueProvider, type TestRogueProvider } from './rogue-provider.js';

/** The service's public URL in these tests (requests to it go through `app.inject`). */
export const PUBLIC_URL = 'http://localhost:3000';
/** The app pages of OAUTH_REDIRECT_URLS; the first is the default. */
export const APP_PAGE = 'https://app.example.test/welcome';
export const SETTINGS_PAGE = 'https://app.example.test/settings';

/** The callback URL of provider `id`. */
export const callbackUrl = (id: string): string => `${PUBLIC_URL}/auth/v0/oauth/${id}/callback`;

/**
 * The identity providers of the tests, each on 127.0.0.1: `op`, panva's oidc-provider (query
 * response mode); `formpost`, a second oidc-provider answering with `response_mode=form_post`;
 * `rogue`, the OpenID Provider that misbehaves on demand; `github`, the GitHub-compatible server.
 */
export interface TestProviders {
  readonly op: TestOpenIdProvider;
  readonly formPost: TestOpenIdProvider;
  readonly rogue: TestRogueProvider;
  readonly github: TestGithubServer;
  /** The settings that configure them (README "Configuration"). */
  readonly env: Record<string, string>;
  close(): Promise<void>;
}

/** Starts the four providers; `extra` is merged into their settings. */
export async function startTestProviders(extra: Record<string, string> = {}): Promise<TestProviders> {
  const [op, formPost, rogue, github] = await Promise.all([
    startOpenIdProvider([callbackUrl('op')]),
    startOpenIdProvider([callbackUrl('formpost')], { clientId: 'latchkey-form-post' }),
    startRogueProvider(callbackUrl('rogue')),
    startGithubServer(callbackUrl('github')),
  ]);
  const env: Record<string, string> = {
    PUBLIC_URL,
    OAUTH_PROVIDERS: 'op,formpost,rogue,github',
    OAUTH_OP_ISSUER: op.issuer,
    OAUTH_OP_CLIENT_ID: op.clientId,
    OAUTH_OP_CLIENT_SECRET: op.clientSecret,
    OAUTH_OP_NAME: 'Test OP',
    OAUTH_FORMPOST_ISSUER: formPost.issuer,
    OAUTH_FORMPOST_CLIENT_ID: formPost.clientId,
    OAUTH_FORMPOST_CLIENT_SECRET: formPost.clientSecret,
    OAUTH_FORMPOST_RESPONSE_MODE: 'form_post',
    OAUTH_ROGUE_ISSUER: rogue.issuer,
    OAUTH_ROGUE_CLIENT_ID: rogue.clientId,
    OAUTH_ROGUE_CLIENT_SECRET: rogue.clientSecret,
    OAUTH_GITHUB_URL: github.url,
    OAUTH_GITHUB_API_URL: github.apiUrl,
    OAUTH_GITHUB_CLIENT_ID: github.clientId,
    OAUTH_GITHUB_CLIENT_SECRET: github.clientSecret,
    OAUTH_REDIRECT_URLS: `${APP_PAGE},${SETTINGS_PAGE}`,
    ...extra,
  };
  return {
    op,
    formPost,
    rogue,
    github,
    env,
    async close() {
      await Promise.all([op.close(), formPost.close(), rogue.close(), github.close()]);
    },
  };
}

/** What a provider's flow ended with. */
export interface FlowEnd {
  /** Every response on the way. */
  readonly hops: BrowserResponse[];
  /** The last response: the callback's 303 when the flow got that far. */
  readonly last: BrowserResponse;
  /** The 303's Location, parsed. */
  readonly location: URL | undefined;
}

/** A browser signed in at the test providers as `account` (the cookies the GitHub and rogue servers read). */
export function browserAs(ctx: TestContext, providers: TestProviders, account: string): TestBrowser {
  const browser = new TestBrowser(ctx, PUBLIC_URL);
  browser.setCookie(providers.github.url, 'gh_user', account);
  browser.setCookie(providers.rogue.issuer, 'rogue_user', account);
  return browser;
}

/** The end of a flow from `start` (an authorize URL, or a link's `authorization_url`). */
export async function runFlow(browser: TestBrowser, start: string, account = 'alice'): Promise<FlowEnd> {
  const hops = await browser.navigate(start, { account });
  const last = hops.at(-1)!;
  const location = typeof last.headers.location === 'string' ? new URL(last.headers.location) : undefined;
  return { hops, last, location };
}

/** GET authorize of `provider` and on to the end; `redirectTo` as the query's `redirect_to`. */
export function signInWith(browser: TestBrowser, provider: string, options: { account?: string; redirectTo?: string } = {}): Promise<FlowEnd> {
  const query = options.redirectTo === undefined ? '' : `?redirect_to=${encodeURIComponent(options.redirectTo)}`;
  return runFlow(browser, `${PUBLIC_URL}/auth/v0/oauth/${provider}/authorize${query}`, options.account);
}

/** Expects the flow to end at `page` with `error=<code>` (or without `error` when `code` is undefined). */
export function expectLanding(end: FlowEnd, page: string, code?: string): void {
  expect(end.last.status, `${end.last.url} ${end.last.body}`).toBe(303);
  expect(end.location, end.last.url).toBeDefined();
  expect(`${end.location!.origin}${end.location!.pathname}`).toBe(page);
  expect(end.location!.searchParams.get('error')).toBe(code ?? null);
}

/** POST /refresh with the browser's refresh cookie: the access token of the session the callback started. */
export async function refreshIn(browser: TestBrowser): Promise<{ status: number; accessToken: string | undefined; sessionId: string | undefined }> {
  const res = await browser.request(`${PUBLIC_URL}/auth/v0/refresh`, { method: 'POST' });
  const body = res.status === 200 ? (JSON.parse(res.body) as { tokens: { access_token: string }; session_id: string }) : undefined;
  return { status: res.status, accessToken: body?.tokens.access_token, sessionId: body?.session_id };
}

/** The claims of an access token (no verification: the tests read what the service signed). */
export function claimsOf(accessToken: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(accessToken.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
}

/** A free TCP port on 127.0.0.1 (nothing listens on it when this returns). */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
