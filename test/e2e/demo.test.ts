import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { ERROR_CATALOG } from '../../src/errors.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { latestCode, refresh, signIn, uniqueName } from '../helpers/flows.js';

/** Debian's chromium package (`apt-get install -y chromium`); .ci/run installs it. */
const CHROMIUM = '/usr/bin/chromium';
/**
 * Chromium flags for a root user in a sandbox with no outside network (the machine notes): no
 * sandbox, no GPU, and none of the background connections to Google that would be refused.
 */
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
/** How long one step of the page (a click and the request it makes) may take. */
const STEP_TIMEOUT_MS = 15_000;
const PASSWORD = 'correct horse battery staple';

/** Without Chromium the browser test is skipped, except in CI, where it must run (and fails). */
const SKIP_BROWSER = !existsSync(CHROMIUM) && !process.env.CI;

describe('GET /auth/v0/demo (DEMO_PAGE)', () => {
  it('is off by default: 404 request.not_found', async () => {
    expect(loadConfig({}).demoPage).toBe(false);
    const ctx = await createTestContext();
    try {
      const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/demo' });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ code: 'request.not_found', message: ERROR_CATALOG['request.not_found'].message });
    } finally {
      await ctx.close();
    }
  });

  it('DEMO_PAGE takes true or false only', () => {
    expect(loadConfig({ DEMO_PAGE: 'true' }).demoPage).toBe(true);
    expect(loadConfig({ DEMO_PAGE: 'false' }).demoPage).toBe(false);
    expect(() => loadConfig({ DEMO_PAGE: 'yes please' })).toThrow(ConfigError);
  });

  it('with DEMO_PAGE=true: one self-contained HTML page under a nonce-based Content-Security-Policy, new nonce per answer', async () => {
    const ctx = await createTestContext({ DEMO_PAGE: 'true' });
    try {
      const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/demo' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
      const csp = String(res.headers['content-security-policy']);
      const nonce = /script-src 'nonce-([A-Za-z0-9+/=]+)'/.exec(csp)?.[1];
      expect(nonce).toBeDefined();
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain(`style-src 'nonce-${nonce}'`);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
      // Every script and style element carries the nonce; nothing is loaded from elsewhere.
      const html = res.body;
      expect(html.match(/<script\b[^>]*>/g)).toEqual([`<script nonce="${nonce}">`]);
      expect(html.match(/<style\b[^>]*>/g)).toEqual([`<style nonce="${nonce}">`]);
      expect(html).not.toMatch(/\s(src|href)=/);
      expect(html).not.toMatch(/\son[a-z]+=/);
      expect(html).not.toMatch(/https?:\/\//);
      // The demo is no part of the API: hidden from the OpenAPI document (where one is served).
      const openapi = await ctx.app.inject({ method: 'GET', url: '/auth/v0/openapi.json' });
      if (openapi.statusCode === 200) expect(Object.keys((openapi.json() as { paths: object }).paths)).not.toContain('/auth/v0/demo');
      const second = await ctx.app.inject({ method: 'GET', url: '/auth/v0/demo' });
      expect(second.headers['content-security-policy']).not.toBe(csp);
    } finally {
      await ctx.close();
    }
  });
});

describe.skipIf(SKIP_BROWSER)('the demo page in headless Chromium (refresh cookie handling)', () => {
  let ctx: TestContext;
  let browser: BrowserContext;
  let page: Page;
  let origin: string;
  let userDataDir: string;
  /** Every request the server received: path and Cookie header (the ground truth of what the browser sent). */
  const serverSaw: { path: string; cookie: string | undefined }[] = [];
  /** Every request the page made, as Chromium reports it with all headers. */
  const browserSent: { url: string; cookie: string | undefined }[] = [];
  const username = uniqueName('demo');
  const email = `${username}@example.test`;

  beforeAll(async () => {
    ctx = await createTestContext({ DEMO_PAGE: 'true' });
    await ctx.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = ctx.app.server.address() as AddressInfo;
    // localhost, not 127.0.0.1: Chromium treats http://localhost as a secure context and keeps
    // Secure cookies for it.
    origin = `http://localhost:${port}`;
    ctx.app.server.on('request', (req: { url?: string; headers: { cookie?: string } }) => {
      serverSaw.push({ path: (req.url ?? '').split('?')[0]!, cookie: req.headers.cookie });
    });
    userDataDir = mkdtempSync(path.join(tmpdir(), 'auth-demo-chromium-'));
    browser = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    page = browser.pages()[0] ?? (await browser.newPage());
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    page.on('requestfinished', (request) => {
      void request.allHeaders().then((headers) => browserSent.push({ url: request.url(), cookie: headers.cookie }));
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
    if (userDataDir !== undefined) rmSync(userDataDir, { recursive: true, force: true });
  });

  /** Runs `action` and waits for the page to log the answer to operation `op`; returns its status. */
  async function step(op: string, action: () => Promise<void>): Promise<number> {
    const entries = page.locator(`#log li[data-op="${op}"]`);
    const before = await entries.count();
    await action();
    await expect.poll(() => entries.count(), { timeout: STEP_TIMEOUT_MS }).toBeGreaterThan(before);
    // The log is newest first.
    return Number(await entries.first().getAttribute('data-status'));
  }

  async function refreshCookie() {
    return (await browser.cookies(`${origin}/auth/v0/refresh`)).find((c) => c.name === 'refresh_token');
  }

  it('runs the whole flow; the refresh cookie is HttpOnly, Secure, SameSite=Strict, sent only to /auth/v0/refresh, never visible to scripts, and useless after logout', async () => {
    const response = await page.goto(`${origin}/auth/v0/demo`);
    expect(response?.status()).toBe(200);
    // The nonce'd inline script ran under the CSP: the page is interactive.
    await expect.poll(() => page.locator('#state').textContent()).toBe('Signed out.');

    // Sign up, then the code from the email.
    await page.fill('#signup-username', username);
    await page.fill('#signup-email', email);
    await page.fill('#signup-password', PASSWORD);
    expect(await step('sign-up', () => page.click('#signup-submit'))).toBe(201);
    expect(await page.inputValue('#verify-email')).toBe(email);
    const code = await latestCode(ctx, email);
    await page.fill('#verify-code', code);
    expect(await step('verify-email', () => page.click('#verify-submit'))).toBe(204);

    // Sign in: the browser stores the refresh cookie with the spec's attributes (§5 rule 2).
    await page.fill('#signin-password', PASSWORD);
    expect(await step('sign-in', () => page.click('#signin-submit'))).toBe(200);
    const cookie = await refreshCookie();
    expect(cookie).toMatchObject({ name: 'refresh_token', path: '/auth/v0/refresh', httpOnly: true, secure: true, sameSite: 'Strict', domain: 'localhost' });
    expect(cookie!.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Page scripts cannot read it, and the page keeps no token in storage.
    // (Page-side expressions as strings: the test compiles without the DOM library.)
    expect(await page.evaluate<string>('document.cookie')).not.toContain('refresh_token');
    expect(await page.evaluate<string>('JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })')).toBe('{}{}');

    // /me with the access token from memory.
    expect(await step('me', () => page.click('#me'))).toBe(200);
    expect(await page.locator('#log li[data-op="me"]').first().textContent()).toContain(`"username": "${username}"`);

    // Refresh: the cookie is sent and replaced.
    expect(await step('refresh', () => page.click('#refresh'))).toBe(200);
    const rotated = await refreshCookie();
    expect(rotated?.value).toBeDefined();
    expect(rotated!.value).not.toBe(cookie!.value);
    expect(await step('me', () => page.click('#me'))).toBe(200);

    // A second session from "another device"; list both and revoke that one from the page.
    const other = await signIn(ctx, { username, password: PASSWORD });
    expect(await step('sessions', () => page.click('#sessions'))).toBe(200);
    await expect.poll(() => page.locator('#sessions-list tr').count()).toBe(2);
    expect(await step('revoke session', () => page.click(`#sessions-list button[data-session-id="${other.sessionId}"]`))).toBe(204);
    await expect.poll(() => page.locator('#sessions-list tr').count()).toBe(1);
    expect((await refresh(ctx, other.refreshToken)).statusCode).toBe(401);

    // Log out: the cookie is cleared in the browser, and a refresh fails.
    const beforeLogout = await refreshCookie();
    expect(await step('logout', () => page.click('#logout'))).toBe(204);
    expect(await refreshCookie()).toBeUndefined();
    expect(await step('refresh', () => page.click('#refresh'))).toBe(401);
    expect(await page.locator('#log li[data-op="refresh"]').first().textContent()).toContain('auth.missing_refresh_token');
    // The last refresh token the browser held is dead too (its session was revoked by logout).
    const replay = await refresh(ctx, beforeLogout!.value);
    expect(replay.statusCode).toBe(401);
    expect(replay.json()).toMatchObject({ code: 'auth.invalid_refresh_token' });

    // The cookie went to /auth/v0/refresh and to no other path: as the server saw it, and as Chromium sent it.
    const withCookie = serverSaw.filter((r) => r.cookie?.includes('refresh_token=') === true);
    expect(withCookie.length).toBeGreaterThanOrEqual(1);
    expect(new Set(withCookie.map((r) => r.path))).toEqual(new Set(['/auth/v0/refresh']));
    expect(serverSaw.some((r) => r.path === '/auth/v0/me')).toBe(true);
    await expect.poll(() => browserSent.length).toBeGreaterThanOrEqual(serverSaw.filter((r) => r.path.startsWith('/auth/v0/')).length);
    const browserWithCookie = browserSent.filter((r) => r.cookie?.includes('refresh_token=') === true);
    expect(browserWithCookie.length).toBeGreaterThanOrEqual(1);
    expect(new Set(browserWithCookie.map((r) => new URL(r.url).pathname))).toEqual(new Set(['/auth/v0/refresh']));
  }, 90_000);
});

describe.skipIf(!SKIP_BROWSER)('the demo page in headless Chromium', () => {
  it.skip(`skipped: ${CHROMIUM} is missing (apt-get install -y chromium); with CI set this test runs and fails instead`, () => {});
});
