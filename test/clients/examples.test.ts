import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, signIn, withBearer } from '../helpers/flows.js';
import { codeNow, enrolled } from '../helpers/mfa.js';
import { CHROMIUM, CHROMIUM_ARGS, SKIP_BROWSER } from './browser-harness.js';

const execFileAsync = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');
const EXAMPLES = path.join(ROOT, 'examples');

/**
 * Builds @latchkey/verify and @latchkey/client into their dist/ folders, which the examples import
 * through the workspace links in node_modules: with the packages' build scripts, which the root
 * package.json's `prepare` runs on `npm ci`, the first command of docs/integration.md.
 */
function buildPackages(): void {
  for (const pkg of ['verify', 'client']) execFileSync(process.execPath, [path.join(ROOT, 'packages', pkg, 'scripts', 'build.mjs')], { stdio: 'pipe' });
}

/** The commands of docs/integration.md's ```sh blocks, in the order a reader meets them (comments and blank lines left out). */
function integrationCommands(): string[] {
  const doc = readFileSync(path.join(ROOT, 'docs', 'integration.md'), 'utf8');
  return [...doc.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((m) => m[1]!.split('\n'))
    .map((line) => line.replace(/(^|\s)#.*$/, '').trim())
    .filter((line) => line !== '');
}

/** Starts an example server and waits for the line that gives its URL. */
async function startExample(script: string, env: Record<string, string>, ready: RegExp): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [path.join(EXAMPLES, script)], { env: { PATH: process.env.PATH ?? '', PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start: ${output}`)), 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const match = ready.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}: ${output}`)));
  });
  return { url, child };
}

/** Runs examples/native-app.mjs once; never rejects on a non-zero exit. */
async function nativeApp(command: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [path.join(EXAMPLES, 'native-app.mjs'), command], { env: { PATH: process.env.PATH ?? '', ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('docs/integration.md read top to bottom', () => {
  it('builds first: `npm ci` (whose prepare builds the service and both packages) comes before the first command that starts the service or an example', () => {
    const commands = integrationCommands();
    const firstRun = commands.findIndex((c) => /^npm start\b|\bnode examples\//.test(c));
    expect(firstRun).toBeGreaterThanOrEqual(0);
    const build = commands.indexOf('npm ci');
    expect(build, 'docs/integration.md has `npm ci` in a sh block').toBeGreaterThanOrEqual(0);
    expect(build, `\`npm ci\` before \`${commands[firstRun]}\``).toBeLessThan(firstRun);
    const prepare = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.prepare!;
    for (const pkg of ['client', 'verify']) expect(prepare).toContain(`node packages/${pkg}/scripts/build.mjs`);
  });
});

describe('the examples of docs/integration.md against a running service', () => {
  let ctx: TestContext;
  let authUrl: string;
  let api: { url: string; child: ChildProcess };
  const children: ChildProcess[] = [];
  const work = mkdtempSync(path.join(tmpdir(), 'latchkey-examples-'));

  beforeAll(async () => {
    buildPackages();
    // Webhooks to the example receiver on this machine; deliveries made by the test (runOnce).
    ctx = await createTestContext({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { startWebhookWorker: false });
    await ctx.app.listen({ host: '127.0.0.1', port: 0 });
    authUrl = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    api = await startExample('resource-server.mjs', { AUTH_URL: authUrl }, /listening on (\S+)/);
    children.push(api.child);
  }, 120_000);
  afterAll(async () => {
    for (const child of children) child.kill('SIGTERM');
    await ctx?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('webhook-receiver.mjs: verifies the service\'s deliveries, handles each event once (a redelivery is acknowledged and skipped), refuses a forged one', async () => {
    const { webhook, secret } = await ctx.app.webhooks.add({ url: 'http://127.0.0.1:9/placeholder', eventTypes: ['user.created'] });
    const receiver = await startExample('webhook-receiver.mjs', { WEBHOOK_SECRET: secret }, /listening on (\S+)/);
    children.push(receiver.child);
    let output = '';
    receiver.child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    await ctx.app.webhooks.update(webhook.id, { url: receiver.url });
    const user = await createVerifiedUser(ctx);
    await ctx.app.webhookDelivery.runOnce();
    const [delivery] = (await ctx.app.webhooks.listDeliveries(webhook.id, {})).deliveries;
    expect(delivery).toMatchObject({ status: 'delivered', last_status: 204 });
    await ctx.app.webhooks.retryDelivery(webhook.id, delivery!.id);
    await ctx.app.webhookDelivery.runOnce();
    const forged = await fetch(receiver.url, { method: 'POST', headers: { 'content-type': 'application/json', 'webhook-id': delivery!.event_id, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' }, body: '{}' });
    expect(forged.status).toBe(400);
    await expect.poll(() => output.trim().split('\n').length).toBe(3);
    const lines = output.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ handled: 'user.created', data: { user: { id: user.id } } });
    expect(lines[1]).toEqual({ duplicate: delivery!.event_id });
    expect(lines[2]).toEqual({ refused: 'invalid_signature' });
  });

  it('resource-server.mjs: 200 with the caller for a valid token, 401 with the Error body otherwise', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: user.password });
    const ok = await fetch(`${api.url}/api/hello`, { headers: { authorization: `Bearer ${session.accessToken}` } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ hello: user.id, session: session.sessionId });
    const missing = await fetch(`${api.url}/api/hello`);
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as { code: string }).code).toBe('auth.missing_access_token');
    const forged = await fetch(`${api.url}/api/hello`, { headers: { authorization: `Bearer ${session.accessToken.slice(0, -2)}AA` } });
    expect(forged.status).toBe(401);
    expect(((await forged.json()) as { code: string }).code).toBe('auth.invalid_access_token');
  });

  it('resource-server.mjs with CHECK_SESSION_SECONDS=0 refuses the token of a session that was logged out', async () => {
    const strict = await startExample('resource-server.mjs', { AUTH_URL: authUrl, CHECK_SESSION_SECONDS: '0' }, /listening on (\S+)/);
    children.push(strict.child);
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: user.password });
    const call = () => fetch(`${strict.url}/api/hello`, { headers: { authorization: `Bearer ${session.accessToken}` } });
    expect((await call()).status).toBe(200);
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', session.accessToken)).statusCode).toBe(204);
    const refused = await call();
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { code: string }).code).toBe('auth.invalid_access_token');
    // The example without the session check accepts it until it expires, as documented.
    expect((await fetch(`${api.url}/api/hello`, { headers: { authorization: `Bearer ${session.accessToken}` } })).status).toBe(200);
  });

  it('native-app.mjs keeps the refresh token itself: sign-in saves it (0600), every run rotates it, logout ends the session', async () => {
    const user = await createVerifiedUser(ctx);
    const sessionFile = path.join(work, 'session');
    const env = { AUTH_URL: authUrl, SESSION_FILE: sessionFile, LATCHKEY_USERNAME: user.username, LATCHKEY_PASSWORD: user.password };

    const signedIn = await nativeApp('sign-in', env);
    expect(signedIn.code, signedIn.stderr).toBe(0);
    expect(JSON.parse(signedIn.stdout)).toMatchObject({ signedIn: user.username });
    expect(statSync(sessionFile).mode & 0o777).toBe(0o600);
    const first = readFileSync(sessionFile, 'utf8');
    expect(first).toMatch(/^[A-Za-z0-9_-]{64}$/);

    const me = await nativeApp('me', env);
    expect(me.code, me.stderr).toBe(0);
    expect(JSON.parse(me.stdout)).toEqual({ user: user.username, session: JSON.parse(signedIn.stdout).session });
    const second = readFileSync(sessionFile, 'utf8');
    expect(second).not.toBe(first); // rotated and saved
    expect((await nativeApp('me', env)).code).toBe(0);
    expect(readFileSync(sessionFile, 'utf8')).not.toBe(second);

    const out = await nativeApp('logout', env);
    expect(out.code, out.stderr).toBe(0);
    expect(existsSync(sessionFile)).toBe(false);
    const after = await nativeApp('me', env);
    expect(after.code).toBe(1);
    expect(after.stderr).toBe('not signed in: run sign-in first\n');
    expect((await nativeApp('me', { AUTH_URL: authUrl })).code).toBe(2);
  });

  it('native-app.mjs signs in an account with a second factor through the challenge cookie and LATCHKEY_TOTP', async () => {
    const { user, secret } = await enrolled(ctx);
    const sessionFile = path.join(work, 'session-mfa');
    const env = { AUTH_URL: authUrl, SESSION_FILE: sessionFile, LATCHKEY_USERNAME: user.username, LATCHKEY_PASSWORD: user.password };
    const withoutCode = await nativeApp('sign-in', env);
    expect(withoutCode.code).toBe(1);
    expect(JSON.parse(withoutCode.stderr)).toMatchObject({ status: 403, code: 'auth.mfa_required' });
    const signedIn = await nativeApp('sign-in', { ...env, LATCHKEY_TOTP: codeNow(ctx, secret) });
    expect(signedIn.code, signedIn.stderr).toBe(0);
    expect(JSON.parse(signedIn.stdout)).toMatchObject({ signedIn: user.username });
    expect((await nativeApp('me', env)).code).toBe(0);
  });

  describe.skipIf(SKIP_BROWSER)('browser-app/ in Chromium', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    }, 60_000);
    afterAll(async () => browser?.close());

    it('signs in, calls the API with the access token, restores the session after a reload, and logs out', async () => {
      const app = await startExample('browser-app/serve.mjs', { AUTH_URL: authUrl, API_URL: api.url }, /open (\S+)/);
      children.push(app.child);
      const user = await createVerifiedUser(ctx, { password: PASSWORD });
      const page = await (await browser.newContext()).newPage();
      page.setDefaultTimeout(15_000);
      await page.goto(app.url);
      await expect.poll(() => page.locator('#state').getAttribute('data-signed-in')).toBe('false');

      await page.fill('#username', user.username);
      await page.fill('#password', 'not the password');
      await page.click('#sign-in-submit');
      await expect.poll(() => page.locator('#error').textContent()).toBe('The credentials are invalid. (auth.invalid_credentials)');
      await page.fill('#password', PASSWORD);
      await page.click('#sign-in-submit');
      await expect.poll(() => page.locator('#state').getAttribute('data-signed-in')).toBe('true');

      await page.click('#call-api');
      await expect.poll(() => page.locator('#api-result').textContent()).toContain(`200 {"hello":"${user.id}"`);
      await page.reload();
      await expect.poll(() => page.locator('#state').getAttribute('data-signed-in')).toBe('true');
      await page.click('#call-api');
      await expect.poll(() => page.locator('#api-result').textContent()).toContain(`200 {"hello":"${user.id}"`);

      await page.click('#logout');
      await expect.poll(() => page.locator('#state').getAttribute('data-signed-in')).toBe('false');
      await page.click('#call-api');
      await expect.poll(() => page.locator('#api-result').textContent()).toContain('401 {"code":"auth.missing_access_token"');
    }, 90_000);
  });
});
