/**
 * The packages are not on the npm registry: each README's "Install" section says how to install
 * one from a clone of this repository. This test runs those commands as written, each block in
 * a new project in the system's temporary folder (outside the repository), with `LATCHKEY` set
 * to this checkout, and imports the package there as an app would. Dependencies (jose,
 * @simplewebauthn/browser) come from the npm registry (`--prefer-offline`: npm's cache first).
 *
 * The first block of each section is the one-time `npm ci` in the clone. The test runs in a
 * checkout where it has run already, so it checks that and runs what `npm ci` runs to build the
 * package (the root package.json's `prepare`), rather than reinstalling the checkout under the
 * other tests.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
/** Time for one package's blocks: `npm pack` builds it (tsc, esbuild), `npm install` may fetch from the registry. */
const INSTALL_TIMEOUT_MS = 180_000;

/** The ```sh blocks of the README's "## Install" section, in order. */
function installBlocks(readme: string): string[] {
  const start = readme.indexOf('\n## Install\n');
  expect(start, 'the README has an "## Install" section').toBeGreaterThanOrEqual(0);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** The environment of a shell in a new project: this process's, without what `npm`/`npx` set for the checkout (npm_config_local_prefix would make npm work on it). */
function appEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key) && key !== 'INIT_CWD'));
  return { ...env, LATCHKEY: ROOT, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
}

const apps: string[] = [];
afterAll(() => {
  for (const app of apps) rmSync(app, { recursive: true, force: true });
});

/** Runs one README block with bash in a new, empty project outside the repository; returns the project's folder. */
function runInNewApp(block: string): string {
  const app = mkdtempSync(path.join(tmpdir(), 'latchkey-install-'));
  apps.push(app);
  expect(path.relative(ROOT, app).startsWith('..')).toBe(true);
  writeFileSync(path.join(app, 'package.json'), `${JSON.stringify({ name: 'my-app', version: '1.0.0', private: true, type: 'module' }, null, 2)}\n`);
  try {
    execFileSync('bash', ['-euo', 'pipefail', '-c', block], { cwd: app, env: appEnv(), stdio: 'pipe', timeout: INSTALL_TIMEOUT_MS });
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`the README's commands failed:\n${block}\n${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`);
  }
  return app;
}

/** Runs an ES module in the project, as its code would; returns its output. */
function runModule(app: string, code: string): string {
  return execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: app, env: appEnv(), encoding: 'utf8' });
}

/** The one-time block in the clone: `npm ci`, whose `prepare` builds the package; checks this checkout has had it and builds as it does. */
function prerequisite(block: string, pkg: 'client' | 'verify'): void {
  const lines = block.replace(/#.*$/gm, '').trim().split('\n').map((line) => line.trim());
  expect(lines[0], 'the first block sets LATCHKEY to the clone').toMatch(/^LATCHKEY=\S+$/);
  expect(lines.slice(1), 'then runs the one-time `npm ci` in the clone').toEqual(['(cd "$LATCHKEY" && npm ci)']);
  expect(existsSync(path.join(ROOT, 'node_modules', '.bin', 'tsc'))).toBe(true);
  const rootPrepare = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.prepare!;
  const build = `node packages/${pkg}/scripts/build.mjs`;
  expect(rootPrepare).toContain(build);
  execFileSync(process.execPath, [path.join(ROOT, 'packages', pkg, 'scripts', 'build.mjs')], { cwd: ROOT, stdio: 'pipe' });
}

describe('installing the packages from this checkout, as their READMEs write it', () => {
  it(
    '@latchkey/client: every way in the README gives a built package in a new project outside the repository: its modules import, @simplewebauthn/browser resolves, dist/latchkey-client.min.js is there',
    () => {
      const [first, ...ways] = installBlocks(readFileSync(path.join(ROOT, 'packages', 'client', 'README.md'), 'utf8'));
      prerequisite(first!, 'client');
      expect(ways.length).toBeGreaterThanOrEqual(2); // a tarball, a folder
      for (const block of ways) {
        const app = runInNewApp(block);
        const installed = realpathSync(path.join(app, 'node_modules', '@latchkey', 'client'));
        expect(existsSync(path.join(installed, 'dist', 'index.js')), block).toBe(true);
        expect(existsSync(path.join(installed, 'dist', 'index.d.ts')), block).toBe(true);
        const out = runModule(
          app,
          `const client = await import('@latchkey/client');
           const ceremonies = await import(new URL('./passkeys.js', import.meta.resolve('@latchkey/client'))); // imports @simplewebauthn/browser
           const standalone = new URL(import.meta.resolve('@latchkey/client/latchkey-client.min.js'));
           const { readFileSync } = await import('node:fs');
           console.log(typeof client.createClient, typeof client.LatchkeyError, typeof ceremonies.createCredential, readFileSync(standalone).length > 1000);`,
        );
        expect(out.trim(), block).toBe('function function function true');
      }
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    '@latchkey/verify: every way in the README gives a built package in a new project outside the repository: its entry points import and work, with jose',
    () => {
      const [first, ...ways] = installBlocks(readFileSync(path.join(ROOT, 'packages', 'verify', 'README.md'), 'utf8'));
      prerequisite(first!, 'verify');
      expect(ways.length).toBeGreaterThanOrEqual(2);
      for (const block of ways) {
        const app = runInNewApp(block);
        const out = runModule(
          app,
          `const { createVerifier, assuranceLevel, VerifyError } = await import('@latchkey/verify');
           const { latchkeyMiddleware } = await import('@latchkey/verify/express');
           const verifier = createVerifier({ jwksUrl: 'http://127.0.0.1:9/jwks', issuer: 'latchkey', audience: 'latchkey' });
           const refused = await verifier.verify('not.a.token').catch((e) => e);
           console.log(typeof latchkeyMiddleware, refused instanceof VerifyError && refused.code, assuranceLevel({ amr: ['hwk', 'user'] }));`,
        );
        expect(out.trim(), block).toBe('function malformed aal2');
      }
    },
    INSTALL_TIMEOUT_MS,
  );
});
