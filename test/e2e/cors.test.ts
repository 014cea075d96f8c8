import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { uniqueName } from '../helpers/flows.js';
import { CHROMIUM, CHROMIUM_ARGS, freePort, SKIP_BROWSER } from '../clients/browser-harness.js';

/** How long one page-side request may take. */
const STEP_TIMEOUT_MS = 15_000;

/** What a script on the app's origin sees of a cross-origin answer (docs/api.md#cors). */
interface SeenAnswer {
  status: number;
  retryAfter: string | null;
  requestId: string | null;
  code: string | null;
}

/**
 * docs/api.md#cors from a real browser: an app on another origin (listed in CORS_ORIGINS) reads
 * the status, the body and the exposed headers of the service's answers, `Retry-After` of a 429
 * included, so that it can wait as long as the service asks.
 */
describe.skipIf(SKIP_BROWSER)('CORS in headless Chromium: what a script on an allowed origin can read', () => {
  let ctx: TestContext;
  let browser: Browser;
  let page: Page;
  /** The app's origin (127.0.0.1) and the service's (localhost): the same server, two origins. */
  let appOrigin: string;
  let apiOrigin: string;
  const methods: string[] = [];

  beforeAll(async () => {
    const port = await freePort();
    appOrigin = `http://127.0.0.1:${port}`;
    apiOrigin = `http://localhost:${port}`;
    ctx = await createTestContext({ CORS_ORIGINS: appOrigin, RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '1' });
    await ctx.app.listen({ host: '127.0.0.1', port });
    ctx.app.server.on('request', (req: { method?: string }) => methods.push(req.method ?? ''));
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    page = await browser.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    // Any document of the app's origin will do: the requests below are made from it.
    expect((await page.goto(`${appOrigin}/healthz`))?.status()).toBe(200);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
  });

  /** Runs `fetch(url, init)` in the page (on the app's origin) and returns what the script can read. */
  function fetchFromApp(url: string, init: Record<string, unknown> = {}): Promise<SeenAnswer> {
    // Runs in the page: the same fetch a browser app makes, credentials included.
    return page.evaluate(async (arg: { url: string; init: Record<string, unknown> }): Promise<SeenAnswer> => {
      const res = await fetch(arg.url, { credentials: 'include', ...arg.init });
      const body = (await res.json().catch(() => ({}))) as { code?: string };
      return { status: res.status, retryAfter: res.headers.get('retry-after'), requestId: res.headers.get('x-request-id'), code: body.code ?? null };
    }, { url, init });
  }

  it('a 429 to a sign-in: the script reads Retry-After and X-Request-Id, and can wait as long as asked', async () => {
    const username = uniqueName('cors');
    const attempt = () =>
      fetchFromApp(`${apiOrigin}/auth/v0/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username, password: 'wrong password here' }),
      });
    const failed = await attempt();
    expect(failed).toMatchObject({ status: 401, code: 'auth.invalid_credentials' });
    const tooMany = await attempt();
    expect(tooMany).toMatchObject({ status: 429, code: 'auth.sign_in.too_many_attempts' });
    expect(Number(tooMany.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(tooMany.requestId).toMatch(/^[0-9a-f-]{36}$/);
    // JSON bodies are preflighted; the browser asked first.
    expect(methods).toContain('OPTIONS');
  }, 30_000);

  it('a simple request (GET, no preflight): the script reads X-Request-Id', async () => {
    const before = methods.length;
    const jwks = await fetchFromApp(`${apiOrigin}/auth/v0/.well-known/jwks.json`);
    expect(jwks.status).toBe(200);
    expect(jwks.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(methods.slice(before)).toEqual(['GET']);
  }, 30_000);
});

describe.skipIf(!SKIP_BROWSER)('CORS in headless Chromium', () => {
  it.skip(`skipped: ${CHROMIUM} is missing (apt-get install -y chromium); with CI set this test runs and fails instead`, () => {});
});
