/**
 * dist/latchkey-client.min.js, the self-contained ES module of @latchkey/client for a page
 * without a bundler (packages/client/README.md, "Without a bundler"): built by the package's
 * own build (its `prepack`, and the root `prepare` that `npm ci` runs), within its gzip
 * budget, with nothing left to import by bare name, and working in Chromium when a page loads
 * it from a served URL with `<script type="module">` against a real service: a password
 * sign-in, and the passkey ceremonies of the inlined @simplewebauthn/browser.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerifiedUser, PASSWORD } from '../helpers/flows.js';
import { addVirtualAuthenticator, CHROMIUM, CHROMIUM_ARGS, SKIP_BROWSER, startFrontDoor, type FrontDoor } from './browser-harness.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLIENT = path.join(ROOT, 'packages', 'client');
const STANDALONE = path.join(CLIENT, 'dist', 'latchkey-client.min.js');
/** The budget of the standalone file, minified and gzipped (zlib level 9): 8 kB. */
const MAX_GZIP_BYTES = 8 * 1024;

/** What the page's `run(op, ...args)` gives back. */
type Outcome = { ok?: unknown; error?: { code: string; status: number } };

describe('@latchkey/client without a bundler: dist/latchkey-client.min.js', () => {
  let file: Buffer;

  beforeAll(() => {
    // The package's build, as `npm run build -w @latchkey/client` and `npm pack` (prepack) run it.
    execFileSync(process.execPath, [path.join(CLIENT, 'scripts', 'build.mjs')], { cwd: CLIENT, stdio: 'pipe' });
    file = readFileSync(STANDALONE);
  }, 120_000);

  it(`is built by the package's build, exported as @latchkey/client/latchkey-client.min.js, one file with no import left, at most ${MAX_GZIP_BYTES} bytes gzipped, its size stated in the README`, () => {
    const pkg = JSON.parse(readFileSync(path.join(CLIENT, 'package.json'), 'utf8')) as { exports: Record<string, unknown>; scripts: Record<string, string> };
    expect(pkg.exports['./latchkey-client.min.js']).toBe('./dist/latchkey-client.min.js');
    expect(pkg.scripts.build).toBe('node scripts/build.mjs');
    expect(pkg.scripts.prepack).toBe('node scripts/build.mjs');
    const text = file.toString('utf8');
    // No static or dynamic import, no require: a browser resolves nothing by bare name.
    expect(text).not.toMatch(/\bimport\s*[({'"*]|\bimport\s+\w|\brequire\(/);
    expect(text).toMatch(/export\s*\{/);
    const gzipped = gzipSync(file, { level: 9 }).length;
    console.log(`dist/latchkey-client.min.js: ${file.length} bytes minified, ${gzipped} bytes gzipped`);
    expect(gzipped).toBeLessThanOrEqual(MAX_GZIP_BYTES);
    // The README states the size to within 0.1 kB (rounded up).
    const readme = readFileSync(path.join(CLIENT, 'README.md'), 'utf8');
    const stated = /latchkey-client\.min\.js[^\n]*?(\d+(?:\.\d)?) kB gzipped/.exec(readme);
    expect(stated, 'the README states the gzipped size of latchkey-client.min.js').not.toBeNull();
    expect(Number(stated![1])).toBeGreaterThanOrEqual(gzipped / 1000);
    expect(Number(stated![1])).toBeLessThanOrEqual(gzipped / 1000 + 0.3);
  });

  describe.skipIf(SKIP_BROWSER)('in Chromium, loaded with <script type="module"> from a served URL', () => {
    let door: FrontDoor;
    let browser: Browser;

    beforeAll(async () => {
      door = await startFrontDoor({}, { clientJs: file });
      browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    }, 60_000);
    afterAll(async () => {
      await browser?.close();
      await door?.close();
    });

    it('signs in with a password, registers a passkey, logs out, and signs in with the passkey (amr hwk+user), against a real service', async () => {
      const page = await (await browser.newContext()).newPage();
      const failed: string[] = [];
      page.on('requestfailed', (r) => failed.push(r.url()));
      page.on('pageerror', (e) => failed.push(e.message));
      await page.goto(`${door.origin}/app/`);
      await expect.poll(() => page.evaluate('typeof window.run')).toBe('function');
      const run = (op: string, ...args: unknown[]): Promise<Outcome> => page.evaluate(([o, a]) => (globalThis as unknown as { run(op: string, ...args: unknown[]): Promise<Outcome> }).run(o, ...a), [op, args] as const);

      const user = await createVerifiedUser(door.ctx, { password: PASSWORD });
      expect(await run('signIn', { username: user.username, password: 'not the password' })).toMatchObject({ error: { code: 'auth.invalid_credentials', status: 401 } });
      expect(await run('signIn', { username: user.username, password: PASSWORD })).toMatchObject({ ok: { user: { username: user.username } } });
      expect(await run('me')).toMatchObject({ ok: { user: { username: user.username } } });

      const cdp = await page.context().newCDPSession(page);
      await addVirtualAuthenticator(cdp);
      expect(await run('passkeys.register', { name: 'Laptop' })).toMatchObject({ ok: { passkey: { name: 'Laptop' } } });
      expect(await run('logout')).toEqual({ ok: null });
      expect(await page.evaluate<boolean>('window.client.signedIn')).toBe(false);
      expect(await run('passkeys.signIn')).toMatchObject({ ok: { user: { username: user.username } } });
      const token = await page.evaluate<string>('window.client.accessToken()');
      expect(JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')).amr).toEqual(['hwk', 'user']);
      expect(failed).toEqual([]);
    }, 60_000);
  });
});
