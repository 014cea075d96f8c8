import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, stopService, type ServiceProcess } from '../reliability/helpers/service-process.js';

const execFileAsync = promisify(execFile);

/** The package root (this file is test/cli/built-cli.test.ts). */
const ROOT = path.resolve(import.meta.dirname, '..', '..');
/** The file package.json "bin" names (the esbuild bundle of src/cli.ts, scripts/bundle.mjs). */
const CLI = path.join(ROOT, (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin['latchkey']!);
/** A build (tsc and esbuild) takes about 15 s on the 2-core machine; leave room for a busy one. */
const BUILD_TIMEOUT_MS = 180_000;
/** How long `serve` may take to listen: PGlite start, migrations and key generation in a fresh DATA_DIR. */
const SERVE_START_TIMEOUT_MS = 60_000;
/** How long the outbox worker may take to write a queued email to the log, and how often to look. */
const EMAIL_WAIT_MS = 15_000;
const POLL_MS = 100;

const work = mkdtempSync(path.join(tmpdir(), 'auth-built-cli-'));

/** Runs the built CLI to completion with `args`; never rejects on a non-zero exit. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [CLI, ...args], {
      cwd: work,
      env: { PATH: process.env.PATH ?? '', DATA_DIR: path.join(work, 'data'), LOG_LEVEL: 'silent', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** The built CLI serving with no command on a free loopback port, in a fresh DATA_DIR under the work folder. */
async function serveBuilt(dataDir: string) {
  const child = spawn(process.execPath, [CLI], {
    cwd: work,
    env: { PATH: process.env.PATH ?? '', DATA_DIR: path.join(work, dataDir), HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const address = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`serve did not listen in time:\n${output}`)), SERVE_START_TIMEOUT_MS);
      const check = (): void => {
        const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (m !== null) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      };
      child.stdout.on('data', check);
      void exited.then((code) => reject(new Error(`serve exited with ${code}:\n${output}`)));
    });
    return { address, child, exited, output: () => output };
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}

/** The newest schema version shipped: the highest number of migrations/NNN.do.*.sql. */
const LATEST_MIGRATION = Math.max(...readdirSync(path.join(ROOT, 'migrations')).map((f) => Number(/^(\d+)\.do\./.exec(f)?.[1] ?? 0)));
/** pino's numeric levels. */
const INFO = 30;
const WARN = 40;

/** A TCP port free on 127.0.0.1 right now (the system picks it; the probe is closed before the service takes it). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The log lines of `service` whose message matches `pattern`. */
function linesMatching(service: ServiceProcess, pattern: RegExp): Record<string, unknown>[] {
  return service.logs.filter((l) => typeof l.msg === 'string' && pattern.test(l.msg));
}

/** Stops `service` with SIGTERM and expects a clean exit. */
async function stopCleanly(service: ServiceProcess): Promise<void> {
  service.child.kill('SIGTERM');
  expect((await service.exited).code).toBe(0);
}

// The built CLI does not depend on the database back end (serve below uses the embedded one),
// so it runs in the PGlite project only: one build, not two racing ones.
describe.skipIf(process.env.TEST_DB === 'postgres')('the built CLI (package.json "bin": dist/service/cli.js)', () => {
  beforeAll(async () => {
    // Builds only when dist/ is older than what it is built from (scripts/ensure-build.mjs, as
    // `npm start` does): after `npm ci` or an unchanged tree the bundle is already current.
    await execFileAsync(process.execPath, [path.join(ROOT, 'scripts', 'ensure-build.mjs')], { cwd: ROOT, timeout: BUILD_TIMEOUT_MS });
  }, BUILD_TIMEOUT_MS);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('is executable and starts with a node shebang (so `npx latchkey` and a global install run it)', () => {
    expect(readFileSync(CLI, 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
    expect(statSync(CLI).mode & 0o111).toBe(0o111);
  });

  it('--help lists every command and exits 0', async () => {
    const res = await cli(['--help']);
    expect(res).toMatchObject({ code: 0, stderr: '' });
    for (const command of ['serve', 'migrate', 'keys generate', 'outbox list', 'outbox retry', 'sessions revoke', 'users delete']) {
      expect(res.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    }
  });

  it.each([
    [['serve', '--help'], 'Usage: latchkey serve'],
    [['migrate', '--help'], 'Usage: latchkey migrate'],
    [['keys', 'generate', '--help'], 'Usage: latchkey keys generate'],
    [['outbox', 'list', '--help'], 'Usage: latchkey outbox list'],
    [['outbox', 'retry', '--help'], 'Usage: latchkey outbox retry'],
    [['sessions', 'revoke', '--help'], 'Usage: latchkey sessions revoke'],
    [['users', 'delete', '--help'], 'Usage: latchkey users delete'],
  ])('%j prints its usage and exits 0', async (args, usage) => {
    const res = await cli(args);
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toContain(usage);
  });

  it('an unknown command or a stray argument to serve is a usage error (exit 2); a bad configuration exits 1', async () => {
    const unknown = await cli(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('Unknown command "frobnicate"');
    expect((await cli(['serve', 'now'])).code).toBe(2);
    expect((await cli(['outbox', 'list', '--status', 'lost'])).code).toBe(2);
    const bad = await cli(['outbox', 'list'], { PORT: 'eighty' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('PORT: expected an integer');
  });

  it('with no command it serves, as npm start does: listens, answers, and exits 0 on SIGTERM', async () => {
    const served = await serveBuilt('serve-data');
    const { address, child, exited } = served;
    try {
      const res = await fetch(`${address}/auth/v0/.well-known/jwks.json`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { keys: unknown[] }).keys).toHaveLength(1);
      // A sign-up runs what the bundle leaves to load late: zxcvbn's packages (CommonJS, imported
      // from node_modules at the first password check), argon2id's native addon, the outbox.
      const signUp = await fetch(`${address}/auth/v0/sign-up`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'built@example.com', username: 'built_cli', password: 'plum-harbor-quietly-71' }),
      });
      expect(signUp.status).toBe(201);
      const weak = await fetch(`${address}/auth/v0/sign-up`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'weak@example.com', username: 'weak_cli', password: 'password1234' }),
      });
      expect(weak.status).toBe(400);
      expect(await weak.json()).toMatchObject({ code: 'auth.sign_up.validation_failed', message: expect.stringMatching(/password/i) as unknown });
      expect(served.output()).toContain('SMTP is not configured');
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, SERVE_START_TIMEOUT_MS + 10_000);

  it('a first start in a fresh DATA_DIR says what it does, at info level, before it listens: the database created (where), the migrations applied (to which version), the keys generated (where); never a key', async () => {
    const dataDir = path.join(work, 'first-start-data');
    let service: ServiceProcess | undefined;
    try {
      service = await startService({ DATA_DIR: dataDir });
      const listening = service.logs.findIndex((l) => typeof l.msg === 'string' && l.msg.startsWith('Server listening at'));
      const before = (pattern: RegExp): Record<string, unknown> => {
        const found = linesMatching(service!, pattern);
        expect(found, `${String(pattern)} in ${JSON.stringify(service!.logs.map((l) => l.msg))}`).toHaveLength(1);
        expect(found[0]!.level).toBe(INFO);
        expect(service!.logs.indexOf(found[0]!)).toBeLessThan(listening);
        return found[0]!;
      };
      const pgliteDir = path.join(dataDir, 'pglite');
      expect(before(/^creating the embedded PGlite database in /).msg).toContain(pgliteDir);
      before(/^embedded database opened$/);
      expect(before(/^applied migrations 1 to \d+: database schema at version \d+$/).msg).toBe(`applied migrations 1 to ${LATEST_MIGRATION}: database schema at version ${LATEST_MIGRATION}`);
      const signingKey = path.join(dataDir, 'jwt-signing-key.pem');
      const mfaKey = path.join(dataDir, 'mfa-key');
      expect(before(/^generated a signing key/).msg).toBe(`generated a signing key (RSA) into ${signingKey} (JWT_PRIVATE_KEY_FILE is unset)`);
      expect(before(/^generated a second-factor key/).msg).toBe(`generated a second-factor key into ${mfaKey} (MFA_KEY_FILE is unset)`);
      const webhookKey = path.join(dataDir, 'webhook-key');
      expect(before(/^generated a webhook key/).msg).toBe(`generated a webhook key into ${webhookKey} (WEBHOOK_KEY_FILE is unset)`);
      // No key material: neither the PEM nor the second-factor or webhook key's text appears in any line.
      const raw = JSON.stringify(service.logs) + service.stderr();
      expect(raw).not.toMatch(/PRIVATE KEY|BEGIN /);
      expect(raw).not.toContain(readFileSync(mfaKey, 'utf8').trim());
      expect(raw).not.toContain(readFileSync(webhookKey, 'utf8').trim());
      await stopCleanly(service);

      // The next start opens what is there: no creation, no migration, no key generated.
      service = await startService({ DATA_DIR: dataDir });
      expect(linesMatching(service, /^opening the embedded PGlite database in /)).toHaveLength(1);
      expect(linesMatching(service, /^database schema is current/).map((l) => l.msg)).toEqual([`database schema is current (version ${LATEST_MIGRATION})`]);
      expect(linesMatching(service, /^creating|^applied|^generated/)).toEqual([]);
      await stopCleanly(service);
    } finally {
      await stopService(service);
    }
  }, 3 * SERVE_START_TIMEOUT_MS);

  it('with DEMO_PAGE=true, a start warns when WEBAUTHN_ORIGINS names no origin on the port it listens on; left unset, the origin follows PORT and nothing is said', async () => {
    const dataDir = path.join(work, 'demo-origin-data');
    let service: ServiceProcess | undefined;
    try {
      const port = await freePort();
      service = await startService({ DATA_DIR: dataDir, DEMO_PAGE: 'true', PORT: String(port), WEBAUTHN_ORIGINS: 'http://localhost:3000' });
      const warnings = linesMatching(service, /WEBAUTHN_ORIGINS/);
      expect(warnings, JSON.stringify(service.logs.map((l) => l.msg))).toHaveLength(1);
      expect(warnings[0]!.level).toBe(WARN);
      expect(warnings[0]!.msg).toContain(`names no origin on port ${port}`);
      expect(warnings[0]!.msg).toContain('http://localhost:3000');
      expect(warnings[0]!.msg).toContain(`http://localhost:${port}`);
      await stopCleanly(service);

      service = await startService({ DATA_DIR: dataDir, DEMO_PAGE: 'true', PORT: String(await freePort()) });
      expect(linesMatching(service, /WEBAUTHN_ORIGINS/)).toEqual([]);
      await stopCleanly(service);
      // Without the demo page the service serves no page of its own: nothing to warn about.
      service = await startService({ DATA_DIR: dataDir, PORT: String(await freePort()), WEBAUTHN_ORIGINS: 'http://localhost:3000' });
      expect(linesMatching(service, /WEBAUTHN_ORIGINS/)).toEqual([]);
      await stopCleanly(service);
    } finally {
      await stopService(service);
    }
  }, 4 * SERVE_START_TIMEOUT_MS);

  it('the README\'s "Try it" session works as written: sign-up, verify, sign-in, /me, refresh, sessions, logout', async () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Try it'));
    const script = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
    expect(script, 'a sh block under "## Try it"').toBeDefined();
    const served = await serveBuilt('readme-data');
    const session = mkdtempSync(path.join(work, 'readme-'));
    const port = new URL(served.address).port;
    const run = async (part: string): Promise<string> =>
      (await execFileAsync('bash', ['-euo', 'pipefail', '-c', part.replaceAll('127.0.0.1:3000', `127.0.0.1:${port}`)], { cwd: session })).stdout;
    try {
      // Up to step 2 as written; then step 2 onwards with the code the service logged.
      const [signUp, rest] = script!.split(/^# 2\./m) as [string, string];
      expect(await run(signUp)).toContain('"is_email_verified":false');
      // The outbox worker writes the email to the log within a second or so.
      let code: string | undefined;
      for (let waited = 0; code === undefined && waited < EMAIL_WAIT_MS; waited += POLL_MS) {
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        code = /verification code is (\d{6})/.exec(served.output())?.[1];
      }
      expect(code, served.output()).toBeDefined();
      const out = await run(`# 2.${rest.replace('"code":"123456"', `"code":"${code}"`)}`);
      expect(out).toContain('"is_email_verified":true'); // /me after verification and sign-in
      expect(out).toMatch(/"sessions":\[\{[^\]]*"current":true/);
      expect(out).toContain('auth.missing_refresh_token'); // refresh after logout: the jar lost its cookie
    } finally {
      served.child.kill('SIGTERM');
      await served.exited;
    }
  }, SERVE_START_TIMEOUT_MS + 30_000);
});
