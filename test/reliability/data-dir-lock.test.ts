import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DATA_DIR_LOCK_FILE } from '../../src/db/data-dir-lock.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { PASSWORD, uniqueName } from '../helpers/flows.js';
import { ON_POSTGRES } from './helpers/app-context.js';
import { MAIN_JS, startService, stopService, type ServiceProcess } from './helpers/service-process.js';

/**
 * One process per DATA_DIR (docs/operations.md, "One process per DATA_DIR"): the embedded
 * PGlite database is one process's in-memory copy of its files, so a second process on the same
 * directory would silently lose one side's writes. The real service (`node dist/service/main.js`)
 * and the real CLI (`node dist/service/cli.js`) are spawned on one DATA_DIR: the second one
 * refuses at once, and a lock left by SIGKILL does not stop the next start. With DATABASE_URL
 * set (the postgres project) no lock is taken: several instances share one DATA_DIR.
 */

/** The built CLI (package.json "bin"; test/reliability/global-setup.ts builds it). */
const CLI_JS = path.join(path.dirname(MAIN_JS), 'cli.js');
/**
 * How soon a refused process must have exited, in milliseconds: it stops before loading PGlite,
 * so this is Node.js start plus the bundle's load (about 0.3 s), with room for a busy 2-core
 * machine; a process that got past the lock would listen (or hang) instead.
 */
const REFUSE_WITHIN_MS = 10_000;
/** Exit code of a service that cannot start, and of a CLI command that fails (src/serve.ts, src/cli-support.ts). */
const EXIT_FAILURE = 1;

/** How a process run to its end finished. */
interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `node <script> ...args` with a clean environment (PATH plus `env`) and waits for it to exit.
 * @throws when it has not exited within {@link REFUSE_WITHIN_MS} (it is then killed); the message carries its output.
 */
function runToExit(script: string, args: readonly string[], env: Record<string, string>): Promise<Finished> {
  const child = spawn(process.execPath, [script, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${path.basename(script)} ${args.join(' ')} still ran after ${REFUSE_WITHIN_MS} ms:\n${stderr}\n${stdout.slice(-2_000)}`));
    }, REFUSE_WITHIN_MS);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      // 'exit' can come before the pipes are drained; 'close' comes after.
      child.once('close', () => resolve({ code, signal, stdout, stderr }));
    });
  });
}

const json = (body: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** Signs up a phone-only user (no email to verify) and signs in; returns the username and the access token. */
async function newUser(service: ServiceProcess): Promise<{ username: string; accessToken: string }> {
  const username = uniqueName('lock');
  const phone = `+1555${String(Math.floor(Math.random() * 10_000_000)).padStart(7, '0')}`;
  const signUp = await fetch(`${service.url}/auth/v0/sign-up`, json({ username, phone, password: PASSWORD }));
  expect(signUp.status).toBe(201);
  const accessToken = await signIn(service, username);
  return { username, accessToken };
}

/** Signs `username` in; returns the access token. */
async function signIn(service: ServiceProcess, username: string): Promise<string> {
  const res = await fetch(`${service.url}/auth/v0/sign-in`, json({ username, password: PASSWORD }));
  expect(res.status, `sign-in of ${username}`).toBe(200);
  return ((await res.json()) as { tokens: { access_token: string } }).tokens.access_token;
}

const me = (service: ServiceProcess, accessToken: string): Promise<Response> =>
  fetch(`${service.url}/auth/v0/me`, { headers: { authorization: `Bearer ${accessToken}` } });

/** Asserts the refusal: exit 1 at once, a message naming DATA_DIR and the holder, no stack trace, nothing on stdout. */
function expectRefused(res: Finished, dataDir: string, holder: ServiceProcess): void {
  expect(res.code, res.stderr).toBe(EXIT_FAILURE);
  expect(res.stderr).toContain(dataDir);
  expect(res.stderr).toContain(`pid ${holder.child.pid}`);
  expect(res.stderr).toContain('"serve"');
  expect(res.stderr).toMatch(/since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/);
  expect(res.stderr).not.toMatch(/^\s+at /m);
  expect(res.stdout).toBe('');
}

describe.skipIf(ON_POSTGRES)('one process per DATA_DIR on the embedded database', () => {
  let dataDir: string;
  const running: ServiceProcess[] = [];
  const env = (): Record<string, string> => ({ DATA_DIR: dataDir, LOG_LEVEL: 'info', RATE_LIMIT_SIGN_UP_PER_IP: '0' });
  const start = async (): Promise<ServiceProcess> => {
    const service = await startService(env());
    running.push(service);
    return service;
  };
  const lockFile = (): string => path.join(dataDir, DATA_DIR_LOCK_FILE);

  beforeAll(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'auth-lock-'));
  });
  afterEach(async () => {
    for (const service of running.splice(0)) await stopService(service);
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('a second service on the same DATA_DIR exits 1 at once naming the holder; the first keeps serving and nothing it wrote is lost', async () => {
    const first = await start();
    const before = await newUser(first);

    const second = await runToExit(MAIN_JS, [], { ...env(), HOST: '127.0.0.1', PORT: '0' });
    expect(second.stderr).toMatch(/^latchkey failed to start: /);
    expectRefused(second, dataDir, first);

    // The first still serves, and what it writes now is kept: after a restart both users are there.
    const after = await newUser(first);
    expect((await me(first, before.accessToken)).status).toBe(200);
    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(lockFile())).toBe(false);

    const restarted = await start();
    for (const user of [before, after]) {
      expect((await me(restarted, user.accessToken)).status).toBe(200);
      await signIn(restarted, user.username);
    }
  });

  it('the CLI beside a running service refuses (exit 1, the message) and changes nothing: the session stays active', async () => {
    const service = await start();
    const user = await newUser(service);

    const revoke = await runToExit(CLI_JS, ['sessions', 'revoke', '--user', user.username], env());
    expectRefused(revoke, dataDir, service);
    expect(revoke.stderr).not.toContain('Revoked');
    expect((await me(service, user.accessToken)).status).toBe(200);

    // Every other command that opens the database refuses the same way.
    for (const args of [['migrate'], ['outbox', 'list'], ['outbox', 'retry', '--all-dead']]) {
      expectRefused(await runToExit(CLI_JS, args, env()), dataDir, service);
    }
    expect((await me(service, user.accessToken)).status).toBe(200);

    // Once the service is stopped, the same command works and the session ends.
    service.child.kill('SIGTERM');
    expect(await service.exited).toEqual({ code: 0, signal: null });
    const stopped = await runToExit(CLI_JS, ['sessions', 'revoke', '--user', user.username], env());
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stdout).toMatch(/^Revoked 1 active session of /);
    expect(existsSync(lockFile())).toBe(false);
    const restarted = await start();
    expect((await me(restarted, user.accessToken)).status).toBe(401);
  });

  it('after SIGKILL the lock file stays behind, and the next start takes it over', async () => {
    const killed = await start();
    const user = await newUser(killed);
    killed.child.kill('SIGKILL');
    expect(await killed.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: killed.child.pid, command: 'serve' });

    const next = await start();
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: next.child.pid, command: 'serve' });
    await signIn(next, user.username);
    // And it holds the directory like any owner: a second start is refused.
    expectRefused(await runToExit(MAIN_JS, [], { ...env(), HOST: '127.0.0.1', PORT: '0' }), dataDir, next);
    next.child.kill('SIGTERM');
    expect(await next.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(lockFile())).toBe(false);
  });
});

describe.runIf(ON_POSTGRES)('PostgreSQL mode takes no DATA_DIR lock', () => {
  let database: TestDatabase;
  let dataDir: string;
  const running: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = mkdtempSync(path.join(tmpdir(), 'auth-lock-pg-'));
  });
  afterAll(async () => {
    for (const service of running.splice(0)) await stopService(service);
    await database?.drop();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  it('two services with DATABASE_URL share one DATA_DIR (the signing key) and both serve', async () => {
    const env = { DATABASE_URL: database.url!, DATA_DIR: dataDir, RATE_LIMIT_SIGN_UP_PER_IP: '0' };
    const a = await startService(env);
    running.push(a);
    const b = await startService(env);
    running.push(b);
    const user = await newUser(a);
    expect((await me(b, user.accessToken)).status).toBe(200);
    expect(existsSync(path.join(dataDir, DATA_DIR_LOCK_FILE))).toBe(false);
  });
});
