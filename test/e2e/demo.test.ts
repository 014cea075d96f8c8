import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { ERROR_CATALOG } from '../../src/errors.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { codeNow, enrolled, nextStep } from '../helpers/mfa.js';
import { totpQrSvg } from '../../src/modules/demo/demo.routes.js';
import { createVerifiedUser, emailChangeCode, latestCode, postJson, refresh, resetCode, signIn, uniqueName, withBearer } from '../helpers/flows.js';
import { addVirtualAuthenticator, freePort } from '../clients/browser-harness.js';

/** Debian's chromium package (`apt-get install -y chromium`); .ci/run installs it. */
const CHROMIUM = '/usr/bin/chromium';
/**
 * Chromium flags for a root user in a sandbox with no outside network (the machine notes): no
 * sandbox, no GPU, and none of the background connections to Google that would be refused; and
 * localhost resolved to 127.0.0.1, where the service listens.
 */
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--host-resolver-rules=MAP localhost 127.0.0.1'];
/** How long one step of the page (a click and the request it makes) may take. */
const STEP_TIMEOUT_MS = 15_000;
const PASSWORD = 'correct horse battery staple';

/** Without Chromium the browser test is skipped, except in CI, where it must run (and fails). */
const SKIP_BROWSER = !existsSync(CHROMIUM) && !process.env.CI;
/** Set DEMO_SCREENSHOT_DIR to a directory to keep PNGs of the failed logout and of the sessions card at each width checked. */
const SCREENSHOT_DIR = process.env.DEMO_SCREENSHOT_DIR;

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
      expect(html).toContain('<title>Latchkey demo</title>');
      expect(html).toContain('<h1>Latchkey demo</h1>');
      expect(html).not.toMatch(/\s(src|href)=/);
      expect(html).not.toMatch(/\son[a-z]+=/);
      expect(html).not.toMatch(/https?:\/\//);
      // The demo is no part of the API: hidden from the OpenAPI document (where one is served).
      const openapi = await ctx.app.inject({ method: 'GET', url: '/auth/v0/openapi.json' });
      if (openapi.statusCode === 200) expect(Object.keys((openapi.json() as { paths: object }).paths)).not.toContain('/auth/v0/demo');
      // The QR route of the TOTP setup renders only otpauth URIs; anything else is a 400.
      const qr = (body: unknown) => ctx.app.inject({ method: 'POST', url: '/auth/v0/demo/totp-qr', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
      const svg = await qr({ otpauth_uri: 'otpauth://totp/Latchkey:alice?secret=JBSWY3DPEHPK3PXP&issuer=Latchkey' });
      expect(svg.statusCode).toBe(200);
      expect(svg.headers['content-type']).toBe('image/svg+xml; charset=utf-8');
      expect(svg.body).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
      for (const bad of [{ otpauth_uri: 'https://example.com/' }, { otpauth_uri: `otpauth://totp/${'a'.repeat(600)}` }, { otpauth_uri: 'otpauth://totp/x', extra: 1 }, {}]) {
        const res = await qr(bad);
        expect(res.statusCode, JSON.stringify(bad)).toBe(400);
        expect(res.json()).toMatchObject({ code: 'auth.mfa.validation_failed' });
      }
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
    // localhost, not 127.0.0.1: Chromium treats http://localhost as a secure context and keeps
    // Secure cookies for it, and WebAuthn takes it as the RP ID (a domain). The port is chosen
    // first: the service's WEBAUTHN_ORIGINS names the page's origin.
    const port = await freePort();
    origin = `http://localhost:${port}`;
    ctx = await createTestContext({ DEMO_PAGE: 'true', WEBAUTHN_ORIGINS: origin });
    await ctx.app.listen({ host: '127.0.0.1', port });
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

  /** The outcome the page shows for the last action ("success" or "error") and its text. */
  async function notice() {
    const el = page.locator('#notice');
    if (await el.isHidden()) return undefined;
    return { outcome: await el.getAttribute('data-outcome'), text: await el.textContent() };
  }

  /** Opens the page, waits for the load-time session check, and signs in through the form. */
  async function signInOnPage(user: { username: string }) {
    await page.goto(`${origin}/auth/v0/demo`);
    await expect.poll(() => page.locator('#state').getAttribute('data-signed-in')).not.toBe('unknown');
    await page.fill('#signin-username', user.username);
    await page.fill('#signin-password', PASSWORD);
    expect(await step('sign-in', () => page.click('#signin-submit'))).toBe(200);
    await expect.poll(() => page.locator('#state').textContent()).toContain('Signed in');
    const sessionId = /session ([0-9a-f-]{36})/.exec((await page.locator('#state').textContent()) ?? '')?.[1];
    expect(sessionId).toBeDefined();
    return sessionId!;
  }

  it('runs the whole flow; the refresh cookie is HttpOnly, Secure, SameSite=Strict, sent only to /auth/v0/refresh, never visible to scripts, and useless after logout', async () => {
    const response = await page.goto(`${origin}/auth/v0/demo`);
    expect(response?.status()).toBe(200);
    expect(await page.title()).toBe('Latchkey demo');
    expect(await page.locator('h1').textContent()).toBe('Latchkey demo');
    // The nonce'd inline script ran under the CSP: the page is interactive. On load it looked for
    // a session to restore; with no cookie the 401 is no error: no notice, a neutral log line.
    await expect.poll(() => page.locator('#state').textContent()).toBe('Signed out.');
    expect(await page.locator('#notice').isHidden()).toBe(true);
    const restoreLog = page.locator('#log li[data-op="restore session"]');
    expect(await restoreLog.count()).toBe(1);
    expect(await restoreLog.getAttribute('class')).toBe('info');

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
    expect(cookie!.value).toMatch(/^[A-Za-z0-9_-]{64}$/);
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
    expect(await notice()).toEqual({ outcome: 'success', text: 'Logged out: the session was revoked and the refresh cookie cleared.' });
    expect(await page.locator('#state').textContent()).toBe('Signed out.');
    expect(await refreshCookie()).toBeUndefined();
    // Signed out, the cards that need a session are gone; a refresh from the page's origin sends
    // no cookie any more.
    expect(await page.locator('#session-card').isHidden()).toBe(true);
    const afterLogout = await page.evaluate(async (url: string) => {
      const res = await fetch(url, { method: 'POST', credentials: 'include' });
      return { status: res.status, body: (await res.json()) as unknown };
    }, `${origin}/auth/v0/refresh`);
    expect(afterLogout).toEqual({ status: 401, body: { code: 'auth.missing_refresh_token', message: ERROR_CATALOG['auth.missing_refresh_token'].message } });
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

  it('a reload restores the session through the refresh cookie: signed in again, with the user from /me, and no password typed', async () => {
    const user = await createVerifiedUser(ctx, { password: PASSWORD });
    const sessionId = await signInOnPage(user);
    const cookie = await refreshCookie();
    expect(cookie).toBeDefined();

    const seenBefore = serverSaw.length;
    await page.reload();
    // The access token was in memory only and is gone; the cookie brings the session back.
    await expect.poll(() => page.locator('#state').textContent()).toBe(`Signed in as ${user.username} (${user.email}): session ${sessionId} (access token held in memory).`);
    expect(await page.locator('#state').getAttribute('data-signed-in')).toBe('true');
    expect(await page.locator('#log li[data-op="restore session"]').first().getAttribute('data-status')).toBe('200');
    expect(await page.locator('#log li[data-op="me"]').first().getAttribute('data-status')).toBe('200');
    expect(await page.locator('#log li[data-op="me"]').first().textContent()).toContain(`"username": "${user.username}"`);
    expect(await notice()).toEqual({ outcome: 'success', text: `Session restored through the refresh cookie: you are ${user.username}.` });
    // Nothing was typed: the password field is empty and no sign-in went to the server.
    expect(await page.inputValue('#signin-password')).toBe('');
    const afterReload = serverSaw.slice(seenBefore).filter((r) => r.path.startsWith('/auth/v0/'));
    // The page, the restore (refresh, then /me), and the identity providers for the sign-in buttons (in parallel with the restore).
    expect(afterReload.map((r) => r.path).filter((p) => p !== '/auth/v0/oauth/providers')).toEqual(['/auth/v0/demo', '/auth/v0/refresh', '/auth/v0/me']);
    expect(afterReload.filter((r) => r.path === '/auth/v0/oauth/providers')).toHaveLength(1);
    expect(afterReload.find((r) => r.path === '/auth/v0/refresh')!.cookie).toContain(`refresh_token=${cookie!.value}`);
    // The restored access token works.
    expect(await step('me', () => page.click('#me'))).toBe(200);
    expect(await step('sessions', () => page.click('#sessions'))).toBe(200);
    expect(await page.locator(`#sessions-list button[data-session-id="${sessionId}"]`).count()).toBe(1);
  }, 60_000);

  it('a logout the server refuses (503) is shown as a failure: the error message and code, no "logged out", the session still shown and still alive', async () => {
    const user = await createVerifiedUser(ctx, { password: PASSWORD });
    const sessionId = await signInOnPage(user);
    expect(await step('sessions', () => page.click('#sessions'))).toBe(200);
    const signedInState = await page.locator('#state').textContent();
    const cookie = await refreshCookie();

    const logoutUrl = `${origin}/auth/v0/logout`;
    const unavailable = { code: 'service_unavailable', message: ERROR_CATALOG.service_unavailable.message };
    await page.route(logoutUrl, (route) => route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify(unavailable) }));
    try {
      expect(await step('logout', () => page.click('#logout'))).toBe(503);
    } finally {
      await page.unroute(logoutUrl);
    }
    expect(await page.locator('body').innerText()).not.toMatch(/logged out/i);
    // Still signed in, the same session, its row still listed, the cookie still there.
    expect(await page.locator('#state').textContent()).toBe(signedInState);
    expect(await page.locator('#sessions-table').isVisible()).toBe(true);
    expect(await page.locator(`#sessions-list button[data-session-id="${sessionId}"]`).count()).toBe(1);
    expect((await refreshCookie())?.value).toBe(cookie!.value);
    // And the failure is shown, with the Error body's message and code.
    expect(await notice()).toEqual({ outcome: 'error', text: `Log out failed: ${unavailable.message} (service_unavailable, HTTP 503)` });
    if (SCREENSHOT_DIR !== undefined) await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'demo-logout-503.png') });
    expect(await page.locator('#state').getAttribute('data-signed-in')).toBe('true');
    // And it is alive: /me works with the same access token.
    expect(await step('me', () => page.click('#me'))).toBe(200);
    expect(await notice()).toEqual({ outcome: 'success', text: `GET /me: you are ${user.username}.` });

    // The real logout then succeeds and says so.
    expect(await step('logout', () => page.click('#logout'))).toBe(204);
    expect(await notice()).toMatchObject({ outcome: 'success' });
    expect(await page.locator('#state').textContent()).toBe('Signed out.');
    expect(await refreshCookie()).toBeUndefined();
  }, 60_000);

  it('a logout answered 401 (the session was revoked elsewhere) is shown as the failure it is, not as a logout', async () => {
    const user = await createVerifiedUser(ctx, { password: PASSWORD });
    const sessionId = await signInOnPage(user);
    // Another device revokes this session.
    const other = await signIn(ctx, { username: user.username, password: PASSWORD });
    expect((await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${sessionId}`, other.accessToken)).statusCode).toBe(204);

    expect(await step('logout', () => page.click('#logout'))).toBe(401);
    // The page tried the refresh cookie once; it was refused too.
    expect(await page.locator('#log li[data-op="refresh (after 401)"]').first().getAttribute('data-status')).toBe('401');
    expect(await page.locator('body').innerText()).not.toMatch(/logged out|cookie was cleared/i);
    expect(await page.locator('#state').textContent()).toBe('Signed out: the session has ended elsewhere (the refresh token was refused too).');
    expect(await notice()).toEqual({ outcome: 'error', text: `Log out failed: ${ERROR_CATALOG['auth.invalid_access_token'].message} (auth.invalid_access_token, HTTP 401)` });
  }, 60_000);

  it('changes the email address, resets a forgotten password and deletes the account from the page, each answer shown as the API gave it', async () => {
    const user = await createVerifiedUser(ctx, { password: PASSWORD });
    await signInOnPage(user);
    const before = await refreshCookie();

    // Change the email: a code to the new address, nothing changed until it is confirmed.
    const newEmail = `${uniqueName('moved')}@example.test`;
    await page.fill('#change-email-new', newEmail);
    await page.fill('#change-email-password', PASSWORD);
    expect(await step('change-email', () => page.click('#change-email-submit'))).toBe(204);
    expect(await notice()).toEqual({ outcome: 'success', text: `A code was sent to ${newEmail}. Nothing changes until you confirm it.` });
    expect(await page.inputValue('#change-email-password')).toBe('');
    await page.fill('#change-email-code', await emailChangeCode(ctx, newEmail));
    expect(await step('change-email confirm', () => page.click('#change-email-confirm'))).toBe(200);
    expect(await notice()).toEqual({ outcome: 'success', text: `Your email address is now ${newEmail}.` });
    await expect.poll(() => page.locator('#state').textContent()).toContain(`Signed in as ${user.username} (${newEmail})`);

    // Forgot the password: a code to the (new) address; the reset signs every session out.
    await page.fill('#reset-email', newEmail);
    expect(await step('password-reset', () => page.click('#reset-request'))).toBe(204);
    expect(await notice()).toEqual({ outcome: 'success', text: `If ${newEmail} has an account, a reset code is on its way.` });
    const { code } = await resetCode(ctx, newEmail);
    // A password the policy refuses is shown with the API's reason, and the code stays usable.
    await page.fill('#reset-code', code);
    await page.fill('#reset-password', 'password');
    expect(await step('password-reset confirm', () => page.click('#reset-confirm'))).toBe(400);
    expect((await notice())?.outcome).toBe('error');
    expect((await notice())?.text).toContain('(auth.password_reset.validation_failed, HTTP 400)');
    const newPassword = 'plum tractor velvet harbour';
    await page.fill('#reset-password', newPassword);
    expect(await step('password-reset confirm', () => page.click('#reset-confirm'))).toBe(204);
    expect(await page.locator('#state').textContent()).toBe('Signed out: the password was reset.');
    expect((await refresh(ctx, before!.value)).statusCode).toBe(401);

    // Sign in with the new password, then delete the account: a wrong password first.
    await page.fill('#signin-username', user.username);
    await page.fill('#signin-password', newPassword);
    expect(await step('sign-in', () => page.click('#signin-submit'))).toBe(200);
    await page.fill('#delete-password', PASSWORD);
    expect(await step('delete-account', () => page.click('#delete-account'))).toBe(401);
    expect(await notice()).toEqual({ outcome: 'error', text: `Deleting the account failed: ${ERROR_CATALOG['auth.invalid_current_password'].message} (auth.invalid_current_password, HTTP 401)` });
    expect(await page.locator('#state').getAttribute('data-signed-in')).toBe('true');
    await page.fill('#delete-password', newPassword);
    expect(await step('delete-account', () => page.click('#delete-account'))).toBe(204);
    expect(await page.locator('#state').textContent()).toBe('Signed out: the account was deleted.');
    expect(await refreshCookie()).toBeUndefined();
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: newPassword })).statusCode).toBe(401);
  }, 90_000);

  it('runs on @latchkey/client: a second tab restores the session through the cookie, and a logout in one tab signs out both', async () => {
    const user = await createVerifiedUser(ctx, { password: PASSWORD });
    const sessionId = await signInOnPage(user);
    expect(await page.evaluate<string>('typeof LatchkeyClient.createClient')).toBe('function');
    const second = await browser.newPage();
    try {
      await second.goto(`${origin}/auth/v0/demo`);
      await expect.poll(() => second.locator('#state').textContent()).toBe(`Signed in as ${user.username} (${user.email}): session ${sessionId} (access token held in memory).`);
      expect(await step('logout', () => page.click('#logout'))).toBe(204);
      // The other tab hears of it at once (BroadcastChannel), with no request of its own.
      await expect.poll(() => second.locator('#state').textContent()).toBe('Signed out.');
      expect(await second.locator('#state').getAttribute('data-signed-in')).toBe('false');
    } finally {
      await second.close();
    }
  }, 60_000);

  it('an account with a second factor: the password step asks for the code, and the second step signs in', async () => {
    const { user, secret } = await enrolled(ctx);
    await page.goto(`${origin}/auth/v0/demo`);
    await expect.poll(() => page.locator('#state').getAttribute('data-signed-in')).not.toBe('unknown');
    await page.fill('#signin-username', user.username);
    await page.fill('#signin-password', PASSWORD);
    expect(await step('sign-in', () => page.click('#signin-submit'))).toBe(403);
    expect(await notice()).toEqual({ outcome: 'success', text: 'Password accepted; enter the code from the authenticator app to complete the sign-in.' });
    expect(await page.locator('#state').getAttribute('data-signed-in')).toBe('false');
    await page.fill('#signin-mfa-code', codeNow(ctx, secret));
    expect(await step('sign-in mfa', () => page.click('#signin-mfa-submit'))).toBe(200);
    expect(await notice()).toEqual({ outcome: 'success', text: 'Signed in with the second factor.' });
    expect(await page.locator('#state').textContent()).toContain(`Signed in as ${user.username}`);
    expect(await page.inputValue('#signin-mfa-code')).toBe('');
    expect(await step('logout', () => page.click('#logout'))).toBe(204);
  }, 60_000);

  it('enrols a second factor from the page: a QR code of the otpauth URI, the code of the suite\'s own RFC 6238, 10 recovery codes; the next sign-in asks for a code', async () => {
    const user = await createVerifiedUser(ctx, { password: PASSWORD });
    await signInOnPage(user);
    await page.fill('#totp-setup-password', PASSWORD);
    expect(await step('mfa/totp/setup', () => page.click('#totp-setup'))).toBe(200);
    // The QR code is an inline SVG rendered from the otpauth URI of the answer.
    await expect.poll(() => page.locator('#totp-qr svg').count()).toBe(1);
    const secret = (await page.locator('#totp-secret').getAttribute('data-secret'))!;
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    const setupLog = (await page.locator('#log li[data-op="mfa/totp/setup"]').first().textContent())!;
    const uri = /"otpauth_uri": "([^"]+)"/.exec(setupLog)![1]!;
    const shown = await page.locator('#totp-qr svg').evaluate((el: { outerHTML: string }) => el.outerHTML);
    const pathsOf = (svg: string) => [...svg.matchAll(/ d="([^"]+)"/g)].map((m) => m[1]);
    expect(pathsOf(shown)).toEqual(pathsOf(await totpQrSvg(uri)));
    expect(pathsOf(shown).join('').length).toBeGreaterThan(100);

    await page.fill('#totp-enable-code', codeNow(ctx, secret));
    expect(await step('mfa/totp/enable', () => page.click('#totp-enable'))).toBe(200);
    await expect.poll(() => page.locator('#recovery-codes li').count()).toBe(10);
    expect(await page.locator('#totp-qr').isHidden()).toBe(true);
    // The session that enabled it goes on; the next sign-in needs the second step.
    expect(await step('me', () => page.click('#me'))).toBe(200);
    expect(await step('logout', () => page.click('#logout'))).toBe(204);
    nextStep(ctx);
    await page.fill('#signin-username', user.username);
    await page.fill('#signin-password', PASSWORD);
    expect(await step('sign-in', () => page.click('#signin-submit'))).toBe(403);
    await page.fill('#signin-mfa-code', codeNow(ctx, secret));
    expect(await step('sign-in mfa', () => page.click('#signin-mfa-submit'))).toBe(200);
    const { rows } = await ctx.db.query<{ amr: string[] }>('SELECT amr FROM sessions WHERE user_id = $1 AND revoked_at IS NULL', [user.id]);
    expect(rows.map((r) => r.amr)).toEqual([['pwd', 'otp']]);
    // Turned off with a recovery code from the page.
    await page.fill('#totp-disable-password', PASSWORD);
    await page.fill('#totp-disable-code', (await page.locator('#recovery-codes li').first().textContent())!);
    expect(await step('mfa/totp/disable', () => page.click('#totp-disable'))).toBe(204);
    expect(await step('logout', () => page.click('#logout'))).toBe(204);
  }, 90_000);

  it('the sessions table fits its card at 1280 px and at 400 px wide, long user agents and ids wrapped', async () => {
    const user = await createVerifiedUser(ctx, { password: PASSWORD });
    const sessionId = await signInOnPage(user);
    // A second session with a long user agent, with and without spaces to break at.
    const longAgent = `Mozilla/5.0 (X11; Linux x86_64) ${'AppleWebKit/537.36(KHTML,like_Gecko)'.repeat(6)} Chrome/999.0.0.0 Safari/537.36`;
    await signIn(ctx, { username: user.username, password: PASSWORD }, { 'user-agent': longAgent });
    expect(await step('sessions', () => page.click('#sessions'))).toBe(200);
    await expect.poll(() => page.locator('#sessions-list tr').count()).toBe(2);

    // The card that holds the table, and the table's own container.
    const card = page.locator('section', { has: page.locator('#sessions-table') });
    for (const width of [1280, 400]) {
      await page.setViewportSize({ width, height: 900 });
      if (SCREENSHOT_DIR !== undefined) {
        await card.screenshot({ path: path.join(SCREENSHOT_DIR, `demo-sessions-${width}.png`) });
        await page.screenshot({ path: path.join(SCREENSHOT_DIR, `demo-page-${width}.png`), fullPage: true });
      }
      const sizes = await page.evaluate<Record<string, [number, number]>>(`(() => {
        const size = (el) => [el.scrollWidth, el.clientWidth];
        const table = document.getElementById('sessions-table');
        return { card: size(table.closest('section')), container: size(table.parentElement), table: size(table), page: size(document.documentElement) };
      })()`);
      for (const [what, [scrollWidth, clientWidth]] of Object.entries(sizes)) {
        expect(scrollWidth, `${what} at ${width} px: scrollWidth ${scrollWidth} > clientWidth ${clientWidth}`).toBeLessThanOrEqual(clientWidth);
      }
      // Every cell lies within the card.
      const cardBox = (await card.boundingBox())!;
      const cells = await page.evaluate<{ left: number; right: number }[]>(
        `[...document.querySelectorAll('#sessions-list td')].map((td) => { const r = td.getBoundingClientRect(); return { left: r.left, right: r.right }; })`,
      );
      expect(cells).toHaveLength(8);
      for (const box of cells) {
        expect(box.left).toBeGreaterThanOrEqual(cardBox.x);
        expect(box.right).toBeLessThanOrEqual(cardBox.x + cardBox.width);
      }
      const ownRow = page.locator('#sessions-list tr', { has: page.locator(`button[data-session-id="${sessionId}"]`) });
      expect(await ownRow.locator('td').first().textContent()).toContain(sessionId);
      expect(await page.locator('#sessions-list').textContent()).toContain(longAgent);
    }
    await page.setViewportSize({ width: 1280, height: 720 });
  }, 60_000);

  it("passkeys with Chromium's virtual authenticator: added from the page after a password sign-in, listed, renamed; \"Sign in with a passkey\" signs in (amr hwk, user); once deleted, the credential the authenticator still holds is refused", async () => {
    const cdp = await browser.newCDPSession(page);
    const authenticatorId = await addVirtualAuthenticator(cdp);
    const held = async () => (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
    // The ceremonies run in the focused tab (WebAuthn refuses a page without focus).
    await page.bringToFront();
    try {
      // Sign up and verify on the page, then sign in with the password.
      const name = uniqueName('pk');
      const mail = `${name}@example.test`;
      await page.goto(`${origin}/auth/v0/demo`);
      await expect.poll(() => page.locator('#state').getAttribute('data-signed-in')).not.toBe('unknown');
      await page.fill('#signup-username', name);
      await page.fill('#signup-email', mail);
      await page.fill('#signup-password', PASSWORD);
      expect(await step('sign-up', () => page.click('#signup-submit'))).toBe(201);
      await page.fill('#verify-code', await latestCode(ctx, mail));
      expect(await step('verify-email', () => page.click('#verify-submit'))).toBe(204);
      await page.fill('#signin-password', PASSWORD);
      expect(await step('sign-in', () => page.click('#signin-submit'))).toBe(200);

      // Add a named passkey: the table lists it, never used yet.
      await page.fill('#passkey-name', 'Test laptop');
      expect(await step('passkeys/registration', () => page.click('#passkey-add'))).toBe(201);
      expect(await notice()).toEqual({ outcome: 'success', text: 'Passkey "Test laptop" added: it signs you in with no password.' });
      expect(await page.inputValue('#passkey-name')).toBe('');
      const rows = page.locator('#passkeys-list tr');
      await expect.poll(() => rows.count()).toBe(1);
      expect(await rows.first().locator('input.passkey-name').inputValue()).toBe('Test laptop');
      expect(await rows.first().locator('td.last-used').textContent()).toBe('never');
      expect(await held()).toHaveLength(1);
      // Again from the same authenticator: the browser refuses it (the options exclude its credential), and the page says why.
      expect(await step('passkeys/registration/options', () => page.click('#passkey-add'))).toBe(200);
      expect(await notice()).toEqual({ outcome: 'error', text: 'Adding a passkey failed: This authenticator already holds a passkey for this account. (client.passkey_exists)' });
      expect(await page.locator('#log li[data-op="passkeys/registration"]').count()).toBe(1);

      // Rename it in place; the buttons are named after the passkey.
      await rows.first().locator('input.passkey-name').fill('Work laptop');
      expect(await step('rename passkey', () => page.getByRole('button', { name: 'Rename the passkey Test laptop' }).click())).toBe(200);
      expect(await notice()).toEqual({ outcome: 'success', text: 'Passkey renamed to "Work laptop".' });
      await expect.poll(() => page.getByRole('button', { name: 'Delete the passkey Work laptop' }).count()).toBe(1);
      expect(await page.getByRole('textbox', { name: /^Name of the passkey created / }).inputValue()).toBe('Work laptop');
      // The table fits its card, wide and narrow.
      const card = page.locator('#passkeys-card');
      for (const width of [1280, 400]) {
        await page.setViewportSize({ width, height: 900 });
        if (SCREENSHOT_DIR !== undefined) await card.screenshot({ path: path.join(SCREENSHOT_DIR, `demo-passkeys-${width}.png`) });
        const [scrollWidth, clientWidth] = await card.evaluate((el: { scrollWidth: number; clientWidth: number }) => [el.scrollWidth, el.clientWidth]);
        expect(scrollWidth, `the passkeys card at ${width} px`).toBeLessThanOrEqual(clientWidth);
      }
      await page.setViewportSize({ width: 1280, height: 720 });

      // Log out, then sign in with the passkey: no username, no password.
      expect(await step('logout', () => page.click('#logout'))).toBe(204);
      await page.fill('#signin-username', '');
      const answer = page.waitForResponse((r) => new URL(r.url()).pathname === '/auth/v0/sign-in/passkey');
      expect(await step('sign-in/passkey', () => page.click('#signin-passkey'))).toBe(200);
      const body = (await (await answer).json()) as { user: { id: string }; session_id: string; tokens: { access_token: string } };
      expect(await notice()).toEqual({ outcome: 'success', text: 'Signed in with a passkey.' });
      expect(await page.locator('#state').textContent()).toBe(`Signed in as ${name} (${mail}): session ${body.session_id} (access token held in memory).`);
      const claims = JSON.parse(Buffer.from(body.tokens.access_token.split('.')[1]!, 'base64url').toString('utf8')) as { amr: string[]; sid: string };
      expect(claims).toMatchObject({ amr: ['hwk', 'user'], sid: body.session_id });
      const { rows: sessions } = await ctx.db.query<{ amr: string[] }>('SELECT amr FROM sessions WHERE user_id = $1 AND revoked_at IS NULL', [body.user.id]);
      expect(sessions.map((r) => r.amr)).toEqual([['hwk', 'user']]);
      // The session works, and the refresh cookie came with it.
      expect(await step('me', () => page.click('#me'))).toBe(200);
      expect((await refreshCookie())?.value).toMatch(/^[A-Za-z0-9_-]{64}$/);
      expect(await step('passkeys', () => page.click('#passkeys'))).toBe(200);
      expect(await notice()).toEqual({ outcome: 'success', text: '1 passkey.' });
      expect(await rows.first().locator('td.last-used').textContent()).not.toBe('never');

      // Delete it: the table is empty; the authenticator still holds the credential.
      expect(await step('delete passkey', () => page.getByRole('button', { name: 'Delete the passkey Work laptop' }).click())).toBe(204);
      expect(await notice()).toMatchObject({ outcome: 'success' });
      await expect.poll(() => rows.count()).toBe(0);
      expect(await page.locator('#passkeys-empty').isVisible()).toBe(true);
      expect(await step('logout', () => page.click('#logout'))).toBe(204);
      expect(await held()).toHaveLength(1);

      // A sign-in with it is refused, and the page shows the API's answer.
      expect(await step('sign-in/passkey', () => page.click('#signin-passkey'))).toBe(401);
      expect(await notice()).toEqual({ outcome: 'error', text: `Passkey sign-in failed: ${ERROR_CATALOG['auth.passkeys.invalid_response'].message} (auth.passkeys.invalid_response, HTTP 401)` });
      expect(await page.locator('#state').textContent()).toBe('Signed out.');
      expect(await page.locator('#state').getAttribute('data-signed-in')).toBe('false');
    } finally {
      await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId });
      await cdp.detach();
    }
  }, 90_000);
});

describe.skipIf(!SKIP_BROWSER)('the demo page in headless Chromium', () => {
  it.skip(`skipped: ${CHROMIUM} is missing (apt-get install -y chromium); with CI set this test runs and fails instead`, () => {});
});
