import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { buildSync } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { DATA_DIR_LOCK_FILE, DataDirLockedError, FOREIGN_LOCK_STALE_MS, lockDataDir, type LockOwner } from '../../src/db/data-dir-lock.js';
import { openDatabase } from '../../src/db/open.js';
import { PGLITE_FROM_EMPTY_TIMEOUT_MS } from '../helpers/database.js';

/**
 * The DATA_DIR lock of the embedded database (src/db/data-dir-lock.ts, docs/operations.md "One
 * process per DATA_DIR"), on real files and real processes: the other holders are child
 * processes running the module itself (bundled with esbuild for plain `node`), killed with
 * SIGKILL where the test needs a dead owner.
 */

/** Takers racing over one stale lock in each round, and the rounds: more chances to interleave on 2 cores. */
const RACERS = 6;
const RACE_ROUNDS = 4;
/** How long a child may take to answer, in milliseconds (a Node.js start on a busy machine). */
const CHILD_TIMEOUT_MS = 15_000;
/** Linux: owners are told apart by start time and boot id (proc(5)); elsewhere only by pid. */
const ON_LINUX = existsSync('/proc/self/stat');

const work = mkdtempSync(path.join(tmpdir(), 'auth-lock-contract-'));
const LOCK_MODULE = path.join(work, 'data-dir-lock.mjs');
const CHILD = path.join(work, 'child.mjs');

/**
 * The child: takes the lock of argv[2] as command argv[3] when it reads "go" on stdin (at once
 * with "now" as argv[4]), prints one JSON line with the outcome, then holds the lock until
 * stdin ends and exits normally (its 'exit' handler releases the lock; nothing else does).
 */
const CHILD_SOURCE = `
import { createInterface } from 'node:readline';
import { lockDataDir } from ${JSON.stringify(LOCK_MODULE)};
const [dir, command, when] = process.argv.slice(2);
const take = () => {
  try {
    const lock = lockDataDir(dir, command);
    process.stdout.write(JSON.stringify({ outcome: 'acquired', owner: lock.owner }) + '\\n');
  } catch (err) {
    process.stdout.write(JSON.stringify({ outcome: 'refused', name: err.name, reason: err.reason, message: err.message }) + '\\n');
  }
};
if (when === 'now') take();
else process.stdout.write(JSON.stringify({ outcome: 'ready' }) + '\\n');
createInterface({ input: process.stdin }).on('line', (line) => { if (line === 'go') take(); });
process.stdin.on('end', () => process.exit(0));
`;

interface Outcome {
  readonly outcome: 'ready' | 'acquired' | 'refused';
  readonly owner?: LockOwner;
  readonly name?: string;
  readonly reason?: string;
  readonly message?: string;
}

/** A child process running {@link CHILD_SOURCE}. */
interface Child {
  readonly process: ChildProcessWithoutNullStreams;
  /** The next JSON line it prints. */
  next(): Promise<Outcome>;
  /** Ends its stdin and waits for it to exit normally. */
  end(): Promise<void>;
  /** SIGKILL: it dies holding whatever it holds. */
  kill(): Promise<void>;
}

function startChild(dir: string, command: string, when: 'now' | 'on-go'): Child {
  const child = spawn(process.execPath, [CHILD, dir, command, when], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  let pending = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  child.stdout.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    let nl: number;
    while ((nl = pending.indexOf('\n')) !== -1) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      const waiter = waiting.shift();
      if (waiter === undefined) lines.push(line);
      else waiter(line);
    }
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    process: child,
    next: () =>
      new Promise<Outcome>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`child ${child.pid} said nothing within ${CHILD_TIMEOUT_MS} ms:\n${stderr}`)), CHILD_TIMEOUT_MS);
        const deliver = (line: string): void => {
          clearTimeout(timer);
          resolve(JSON.parse(line) as Outcome);
        };
        const line = lines.shift();
        if (line === undefined) waiting.push(deliver);
        else deliver(line);
      }),
    async end() {
      child.stdin.end();
      await exited;
      expect(child.exitCode, stderr).toBe(0);
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** A lock file left behind: taken by a child that is then killed with SIGKILL. */
async function staleLock(dir: string, command = 'serve'): Promise<LockOwner> {
  const holder = startChild(dir, command, 'now');
  const taken = await holder.next();
  expect(taken.outcome).toBe('acquired');
  await holder.kill();
  return taken.owner!;
}

const readOwner = (dir: string): LockOwner => JSON.parse(readFileSync(path.join(dir, DATA_DIR_LOCK_FILE), 'utf8')) as LockOwner;
let dirs = 0;
const freshDir = (): string => path.join(work, `data-${++dirs}`);

// The lock is about files and processes, not the database back end: the PGlite project only.
describe.skipIf(process.env.TEST_DB === 'postgres')('DATA_DIR lock (lockDataDir)', () => {
  beforeAll(() => {
    buildSync({ entryPoints: [path.resolve(import.meta.dirname, '../../src/db/data-dir-lock.ts')], bundle: true, platform: 'node', format: 'esm', outfile: LOCK_MODULE, logLevel: 'warning' });
    writeFileSync(CHILD, CHILD_SOURCE);
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('creates DATA_DIR and a lock file naming this process; release removes it, and a second release is harmless', () => {
    const dir = freshDir();
    const lock = lockDataDir(dir, 'migrate');
    try {
      expect(readOwner(dir)).toEqual(lock.owner);
      expect(lock.owner).toMatchObject({ pid: process.pid, command: 'migrate', hostname: hostname() });
      expect(Date.parse(lock.owner.since)).toBeLessThanOrEqual(Date.now());
      if (ON_LINUX) expect(lock.owner.startTime).toMatch(/^\d+$/);
    } finally {
      lock.release();
    }
    expect(existsSync(lock.file)).toBe(false);
    lock.release();
    // Nothing else is left in the directory (no temporary file, no claim).
    expect(readdirSync(dir)).toEqual([]);
  });

  it('is refused to a second holder in the same process until the first releases it', () => {
    const dir = freshDir();
    const first = lockDataDir(dir, 'serve');
    let refused: unknown;
    try {
      lockDataDir(dir, 'outbox list');
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(DataDirLockedError);
    expect(refused).toMatchObject({ reason: 'held', owner: first.owner });
    expect(readOwner(dir)).toEqual(first.owner);
    first.release();
    const second = lockDataDir(dir, 'outbox list');
    expect(readOwner(dir).command).toBe('outbox list');
    second.release();
  });

  it('is refused while a live process holds it, with a message naming DATA_DIR, the pid, the command and since when; the holder keeps it', async () => {
    const dir = freshDir();
    const holder = startChild(dir, 'serve', 'now');
    try {
      const held = await holder.next();
      expect(held.outcome).toBe('acquired');
      let refused: unknown;
      try {
        lockDataDir(dir, 'sessions revoke');
      } catch (err) {
        refused = err;
      }
      expect(refused).toBeInstanceOf(DataDirLockedError);
      const message = (refused as Error).message;
      expect(message).toContain(`DATA_DIR ${dir} is in use by pid ${holder.process.pid} ("serve") since ${held.owner!.since}`);
      expect(message).toContain('docs/operations.md, "One process per DATA_DIR"');
      expect(message).toContain('DATABASE_URL');
      expect(readOwner(dir)).toEqual(held.owner);
    } finally {
      await holder.end();
    }
    // Its normal exit released it (the 'exit' handler: the child never calls release).
    expect(existsSync(path.join(dir, DATA_DIR_LOCK_FILE))).toBe(false);
  });

  it('takes over the lock of a process killed with SIGKILL', async () => {
    const dir = freshDir();
    const dead = await staleLock(dir);
    expect(readOwner(dir)).toEqual(dead);
    const lock = lockDataDir(dir, 'serve');
    expect(readOwner(dir)).toEqual(lock.owner);
    expect(lock.owner.token).not.toBe(dead.token);
    lock.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it.runIf(ON_LINUX)('takes over a lock whose pid is alive but started at another time (a recycled pid) or before a reboot', () => {
    // The parent process (vitest) is alive; only the start time or the boot id says it is not the owner.
    const live = process.ppid;
    const base = { pid: live, hostname: hostname(), command: 'serve', since: new Date(0).toISOString() };
    const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    for (const [i, stale] of [
      { ...base, startTime: '1', bootId, token: 'recycled' },
      { ...base, startTime: null, bootId: '00000000-0000-4000-8000-000000000000', token: 'rebooted' },
    ].entries()) {
      const dir = freshDir();
      mkdirSync(dir);
      writeFileSync(path.join(dir, DATA_DIR_LOCK_FILE), JSON.stringify(stale));
      const lock = lockDataDir(dir, `case ${i}`);
      expect(readOwner(dir).token).toBe(lock.owner.token);
      lock.release();
    }
    // The same pid with its real start time is the owner: refused.
    const dir = freshDir();
    mkdirSync(dir);
    const startTime = readFileSync(`/proc/${live}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]!;
    writeFileSync(path.join(dir, DATA_DIR_LOCK_FILE), JSON.stringify({ ...base, startTime, bootId, token: 'live' }));
    expect(() => lockDataDir(dir, 'serve')).toThrow(`is in use by pid ${live} ("serve")`);
  });

  it('refuses a lock held on another host while its heartbeat is fresh and takes it over once it stopped; refuses an unreadable lock file, saying which file to delete', () => {
    const foreign = freshDir();
    mkdirSync(foreign);
    const other: LockOwner = { pid: 1, startTime: '1', bootId: null, hostname: `not-${hostname()}`, command: 'serve', since: new Date(0).toISOString(), token: 'elsewhere' };
    writeFileSync(path.join(foreign, DATA_DIR_LOCK_FILE), JSON.stringify(other));
    expect(() => lockDataDir(foreign, 'serve')).toThrow(`on host "not-${hostname()}"`);
    expect(() => lockDataDir(foreign, 'serve')).toThrow(/heartbeat is less than 60 s old/);
    // Its heartbeat stopped (a container killed and recreated under a new hostname): taken over.
    const stopped = new Date(Date.now() - FOREIGN_LOCK_STALE_MS - 5_000);
    utimesSync(path.join(foreign, DATA_DIR_LOCK_FILE), stopped, stopped);
    const taken = lockDataDir(foreign, 'serve');
    expect(JSON.parse(readFileSync(path.join(foreign, DATA_DIR_LOCK_FILE), 'utf8'))).toMatchObject({ hostname: hostname(), token: taken.owner.token });
    taken.release();

    const garbled = freshDir();
    mkdirSync(garbled);
    writeFileSync(path.join(garbled, DATA_DIR_LOCK_FILE), '');
    expect(() => lockDataDir(garbled, 'serve')).toThrow(/not one this service wrote .*If no process uses the directory, delete that file/);
    expect(readFileSync(path.join(garbled, DATA_DIR_LOCK_FILE), 'utf8')).toBe('');
  });

  it('leaves exactly one owner when several processes race to take over one stale lock', async () => {
    for (let round = 0; round < RACE_ROUNDS; round++) {
      const dir = freshDir();
      const dead = await staleLock(dir);
      const racers = Array.from({ length: RACERS }, (_, i) => startChild(dir, `racer ${i}`, 'on-go'));
      try {
        for (const r of racers) expect((await r.next()).outcome).toBe('ready');
        for (const r of racers) r.process.stdin.write('go\n');
        const outcomes = await Promise.all(racers.map((r) => r.next()));
        const winners = outcomes.filter((o) => o.outcome === 'acquired');
        expect(winners, JSON.stringify(outcomes)).toHaveLength(1);
        const winner = winners[0]!.owner!;
        expect(readOwner(dir)).toEqual(winner);
        for (const o of outcomes.filter((x) => x.outcome === 'refused')) {
          expect(o, o.message).toMatchObject({ name: 'DataDirLockedError', reason: 'held' });
          expect(o.message).toContain(`pid ${winner.pid} ("${winner.command}")`);
        }
        expect(winner.token).not.toBe(dead.token);
        // No claim on the stale lock is left behind.
        expect(readdirSync(dir).filter((n) => n !== DATA_DIR_LOCK_FILE)).toEqual([]);
      } finally {
        await Promise.all(racers.map((r) => r.end()));
      }
      expect(existsSync(path.join(dir, DATA_DIR_LOCK_FILE))).toBe(false);
    }
  });

  it('passes over a takeover claim whose taker died, and refuses while a live taker holds one', async () => {
    const dir = freshDir();
    const stale = await staleLock(dir);
    const claim = (n: number): string => path.join(dir, `${DATA_DIR_LOCK_FILE}.takeover.${stale.token}.${n}`);
    // A taker that died between its claim and its replacing the lock file.
    const deadTaker = await staleLock(freshDir(), 'migrate');
    writeFileSync(claim(1), JSON.stringify(deadTaker));
    // A live one (this process's own holding elsewhere stands for it) holds claim 2.
    const other = lockDataDir(freshDir(), 'outbox retry');
    writeFileSync(claim(2), JSON.stringify(other.owner));
    expect(() => lockDataDir(dir, 'serve')).toThrow(`is in use by pid ${process.pid} ("outbox retry")`);
    expect(readOwner(dir)).toEqual(stale);
    other.release();
    // Now both claims are dead ones: the next claim wins, and every claim is cleaned up.
    const lock = lockDataDir(dir, 'serve');
    expect(readOwner(dir)).toEqual(lock.owner);
    expect(readdirSync(dir)).toEqual([DATA_DIR_LOCK_FILE]);
    lock.release();
  });

  it('openDatabase holds the lock while the embedded database is open: a second open is refused before PGlite loads; close releases it', async () => {
    const config = loadConfig({ DATA_DIR: freshDir(), LOG_LEVEL: 'silent' });
    const db = await openDatabase(config, 'serve');
    try {
      expect(readOwner(config.dataDir)).toMatchObject({ pid: process.pid, command: 'serve' });
      await expect(openDatabase(config, 'migrate')).rejects.toThrow(DataDirLockedError);
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
    expect(existsSync(path.join(config.dataDir, DATA_DIR_LOCK_FILE))).toBe(false);
    const again = await openDatabase(config, 'migrate');
    await again.close();
    // Two file-backed PGlite starts, the first with its initdb.
  }, PGLITE_FROM_EMPTY_TIMEOUT_MS);
});
