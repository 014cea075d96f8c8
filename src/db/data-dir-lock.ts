import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';

/**
 * The lock file of the embedded database, in DATA_DIR beside `pglite/` (not inside it: PGlite's
 * initdb wants that folder to itself). It exists while a process has the database open.
 */
export const DATA_DIR_LOCK_FILE = 'pglite.lock';

/**
 * How many times {@link lockDataDir} looks again when the lock file changed under it (released
 * by its owner, or taken over by another process) before it gives up. Each change needs another
 * process to act in the few microseconds between two system calls, so a second look nearly
 * always settles it; a few more cost nothing.
 */
const MAX_ATTEMPTS = 5;

/** Index of `starttime` (field 22 of /proc/<pid>/stat, proc(5)) among the fields after `comm`'s closing parenthesis, which is field 2. */
const STAT_STARTTIME_INDEX = 22 - 3;

/** Linux's id of the running boot (random(4)): a lock written before a reboot is stale whatever its pid. */
const BOOT_ID_FILE = '/proc/sys/kernel/random/boot_id';

/** Read and write for the owner only: the lock file names a process, nothing secret, but nobody else needs it. */
const FILE_MODE = 0o600;

/** Random bytes in a temporary file's name, so that two attempts of one process never collide. */
const TEMPORARY_SUFFIX_BYTES = 6;

/** Random bytes of a holding's token (128 bits: never repeated). */
const TOKEN_BYTES = 16;

const MS_PER_SECOND = 1_000;
/**
 * How often a holder touches its lock file (mtime). The heartbeat is what a process on another
 * host can check: a container recreated after a crash gets a new hostname, so without it a
 * lock left by SIGKILL there would be refused for good.
 */
export const LOCK_HEARTBEAT_MS = 10_000;
/**
 * A lock written on another host whose heartbeat is older than this is stale: six missed
 * heartbeats, far beyond an event-loop stall; hosts sharing a directory need clocks within
 * that margin (they do with NTP).
 */
export const FOREIGN_LOCK_STALE_MS = 60_000;

/** Errors of link(2) on a filesystem without hard links (some FUSE and SMB mounts, FAT). */
const LINK_UNSUPPORTED = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/** Who holds (or held) the lock: the JSON content of the lock file. */
export interface LockOwner {
  readonly pid: number;
  /**
   * The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), as text;
   * null off Linux. A live process with this pid but another start time is a recycled pid.
   */
  readonly startTime: string | null;
  /** Linux's boot id when the lock was taken; null off Linux. */
  readonly bootId: string | null;
  /** `os.hostname()` of the owner: a process on another host (a shared volume) cannot be checked from here. */
  readonly hostname: string;
  /** What the owner runs: `serve`, `migrate`, `sessions revoke`, ... */
  readonly command: string;
  /** When the lock was taken, ISO 8601 UTC. */
  readonly since: string;
  /** Random, unique to this holding: tells a lock from the next one by the same pid. */
  readonly token: string;
}

/** Why a {@link DataDirLockedError} was raised. */
export type LockedReason =
  /** A live process on this host holds it (or is taking it over from a dead one). */
  | 'held'
  /** The holder is on another host, whose processes this host cannot see. */
  | 'foreign-host'
  /** The lock file is there but is not a lock this code wrote. */
  | 'unreadable'
  /** The lock file changed {@link MAX_ATTEMPTS} times while this process looked at it. */
  | 'contended';

/**
 * DATA_DIR is in use by another process (or cannot be claimed). An expected condition, not a
 * bug: `serve` prints the message and exits 1 (src/serve.ts `exitOnStartFailure`), the CLI prints
 * it and exits 1 (src/cli-support.ts `withCommandDatabase`).
 */
export class DataDirLockedError extends Error {
  /**
   * @param owner the holder, when known ('held', 'foreign-host').
   * @param file the file at fault ('unreadable'): the lock file or a takeover claim.
   */
  constructor(
    readonly dataDir: string,
    readonly reason: LockedReason,
    readonly owner: LockOwner | undefined,
    readonly file: string = path.join(dataDir, DATA_DIR_LOCK_FILE),
  ) {
    super(lockedMessage(dataDir, reason, owner, file));
    this.name = 'DataDirLockedError';
  }
}

function lockedMessage(dataDir: string, reason: LockedReason, owner: LockOwner | undefined, file: string): string {
  const advice =
    'The embedded database admits one process at a time (docs/operations.md, "One process per DATA_DIR"): ' +
    'stop that process first (commands such as migrate, outbox and sessions run with the service stopped), ' +
    'or set DATABASE_URL to run on PostgreSQL, which any number of processes may share.';
  const holder = owner === undefined ? '' : `pid ${owner.pid} ("${owner.command}") since ${owner.since}`;
  switch (reason) {
    case 'held':
      return `DATA_DIR ${dataDir} is in use by ${holder}. ${advice}`;
    case 'foreign-host':
      return `DATA_DIR ${dataDir} is locked by ${holder} on host "${owner?.hostname}", which cannot be checked from this host; its heartbeat is less than ${FOREIGN_LOCK_STALE_MS / MS_PER_SECOND} s old. ${advice} A lock whose heartbeat stops is taken over after ${FOREIGN_LOCK_STALE_MS / MS_PER_SECOND} s.`;
    case 'unreadable':
      return `DATA_DIR ${dataDir} has a lock file that is not one this service wrote (${file}). If no process uses the directory, delete that file.`;
    case 'contended':
      return `DATA_DIR ${dataDir}: its lock file (${file}) kept changing while this process tried to take it; another process is starting on it. ${advice}`;
  }
}

/** The exclusive hold of a DATA_DIR, from {@link lockDataDir}. */
export interface DataDirLock {
  /** The lock file's path. */
  readonly file: string;
  /** What the lock file says about this process. */
  readonly owner: LockOwner;
  /**
   * Deletes the lock file if it is still this holding's (idempotent; synchronous, so that it
   * also runs from the process's 'exit' event). Never throws: a lock file that cannot be deleted
   * is stale once this process has exited, and the next start takes it over.
   */
  release(): void;
}

/** Tokens of the locks this process holds now: its own pid is alive, but only these holdings are. */
const heldHere = new Set<string>();

/**
 * Takes the exclusive lock of the embedded database in `dataDir` (docs/operations.md, "One
 * process per DATA_DIR"), at once or not at all: it never waits. The lock is the file
 * `dataDir/`{@link DATA_DIR_LOCK_FILE}, created only if absent (link(2) of a complete temporary
 * file, so that nobody ever reads a half-written lock). It is released by
 * {@link DataDirLock.release} and, as a last resort, on the process's 'exit' event.
 *
 * A lock file left by a process that died without releasing it (SIGKILL, a crash, a power cut)
 * is stale and is taken over: its owner is dead when no process has its pid, when the process
 * with that pid started at another time (a recycled pid; /proc/<pid>/stat field 22, Linux), or
 * when the machine has rebooted since (boot id). Takers of one stale lock race through an
 * exclusive claim file named after that lock's token, so exactly one of them replaces it; the
 * others then find a live owner and are refused. A claim left by a taker that died in turn is
 * stale in the same way and the next claim number is used.
 *
 * @param dataDir the data directory (DATA_DIR); created if missing.
 * @param command what this process runs, shown to a process that is refused (`serve`, `migrate`, ...).
 * @returns the holding, to release on close.
 * @throws {DataDirLockedError} when a live process holds the lock (this process included, for a
 *   second open), when the holder is on another host and its heartbeat (the file's mtime,
 *   touched every {@link LOCK_HEARTBEAT_MS}) is younger than {@link FOREIGN_LOCK_STALE_MS}, when the lock file is unreadable, or
 *   when it keeps changing. A filesystem error (permissions, read-only) as thrown by node:fs.
 */
export function lockDataDir(dataDir: string, command: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, DATA_DIR_LOCK_FILE);
  const me = ownerRecord(command);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    if (createExclusive(file, me)) return holding(file, me);
    const current = readLock(file);
    if (current === 'missing') continue; // released meanwhile: try again
    if (current === 'unreadable') throw new DataDirLockedError(dataDir, 'unreadable', undefined, file);
    const state = ownerState(current, file);
    if (state === 'alive') throw new DataDirLockedError(dataDir, 'held', current);
    if (state === 'foreign-host') throw new DataDirLockedError(dataDir, 'foreign-host', current);
    if (takeOver(dataDir, file, current, me)) return holding(file, me);
  }
  throw new DataDirLockedError(dataDir, 'contended', undefined);
}

/**
 * Replaces the stale lock `stale` by `me`, if this process wins the claim on it.
 * @returns true when this process now holds the lock; false when the lock file changed (look again).
 * @throws {DataDirLockedError} when a live process is taking it over already.
 */
function takeOver(dataDir: string, file: string, stale: LockOwner, me: LockOwner): boolean {
  const prefix = `${DATA_DIR_LOCK_FILE}.takeover.${stale.token}.`;
  // Claim files only: `<prefix><n>`, not the temporary files other takers are writing beside them.
  const claimNumbers = (): number[] =>
    readdirSync(dataDir)
      .filter((name) => name.startsWith(prefix) && /^\d+$/.test(name.slice(prefix.length)))
      .map((name) => Number(name.slice(prefix.length)));
  const claims = claimNumbers();
  const last = claims.length === 0 ? 0 : Math.max(...claims);
  if (last > 0) {
    const claim = path.join(dataDir, `${prefix}${last}`);
    const claimant = readLock(claim);
    if (claimant === 'missing') return false; // the takeover finished meanwhile
    // Torn only where hard links are unsupported, by a claimant that died mid-write or writes now.
    if (claimant === 'unreadable') throw new DataDirLockedError(dataDir, 'unreadable', undefined, claim);
    const state = ownerState(claimant, claim);
    if (state !== 'dead') {
      // A live claim on a lock file that no longer holds `stale` is a late taker's, about to give
      // up: the owner to report is the one in the lock file now.
      if (!holds(file, stale)) return false;
      throw new DataDirLockedError(dataDir, state === 'alive' ? 'held' : 'foreign-host', claimant);
    }
  }
  // Only one process can create claim number last + 1; only a claimant replaces the lock file,
  // and only while it still holds `stale`, which nobody else can change: its owner is dead, a
  // fresh lock cannot be created over it, and any other claim on it has a dead claimant.
  if (!createExclusive(path.join(dataDir, `${prefix}${last + 1}`), me)) return false;
  try {
    if (!holds(file, stale)) return false;
    replace(file, me);
    return true;
  } finally {
    // Every claim on `stale` is moot once the lock file no longer holds it (it never will again).
    for (const n of claimNumbers()) rmSync(path.join(dataDir, `${prefix}${n}`), { force: true });
  }
}

/** Whether the lock file holds `owner`'s holding. */
function holds(file: string, owner: LockOwner): boolean {
  const current = readLock(file);
  return current !== 'missing' && current !== 'unreadable' && current.token === owner.token;
}

/** Registers `me` as held here and returns its holding, released on 'exit' too. */
function holding(file: string, me: LockOwner): DataDirLock {
  heldHere.add(me.token);
  const heartbeat = setInterval(() => {
    try {
      const now = new Date();
      if (holds(file, me)) utimesSync(file, now, now);
    } catch {
      // A missed heartbeat only matters to another host, and only after FOREIGN_LOCK_STALE_MS.
    }
  }, LOCK_HEARTBEAT_MS);
  heartbeat.unref();
  const release = (): void => {
    if (!heldHere.delete(me.token)) return;
    clearInterval(heartbeat);
    process.removeListener('exit', release);
    try {
      if (holds(file, me)) rmSync(file, { force: true });
    } catch {
      // Left behind, it is stale once this process has exited: the next start takes it over.
    }
  };
  process.on('exit', release);
  sweepTemporaryFiles(path.dirname(file));
  return { file, owner: me, release };
}

/** The owner record of this process. */
function ownerRecord(command: string): LockOwner {
  return {
    pid: process.pid,
    startTime: processStartTime(process.pid) ?? null,
    bootId: bootId() ?? null,
    hostname: hostname(),
    command,
    since: new Date().toISOString(),
    token: randomBytes(TOKEN_BYTES).toString('hex'),
  };
}

/**
 * Whether `owner`, read from `file`, still runs: 'alive', 'dead', or 'foreign-host' (another
 * host's process, which this host cannot see: alive while its heartbeat, the file's mtime, is
 * younger than {@link FOREIGN_LOCK_STALE_MS}). Off Linux, without start times, a live pid counts
 * as alive.
 */
function ownerState(owner: LockOwner, file: string): 'alive' | 'dead' | 'foreign-host' {
  if (owner.hostname !== hostname()) return heartbeatAgeMs(file) > FOREIGN_LOCK_STALE_MS ? 'dead' : 'foreign-host';
  const boot = bootId();
  if (owner.bootId !== null && boot !== undefined && owner.bootId !== boot) return 'dead';
  if (owner.pid === process.pid) return heldHere.has(owner.token) ? 'alive' : 'dead';
  if (!pidExists(owner.pid)) return 'dead';
  const started = owner.startTime === null ? undefined : processStartTime(owner.pid);
  // Without a start time to compare (off Linux, or /proc hidden), a live pid counts as the owner.
  if (started === undefined) return pidExists(owner.pid) ? 'alive' : 'dead';
  return started === owner.startTime ? 'alive' : 'dead';
}

/** Milliseconds since `file` was last touched (its holder's heartbeat); infinite when it is gone. */
function heartbeatAgeMs(file: string): number {
  try {
    return Date.now() - statSync(file).mtimeMs;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** Whether a process with this pid exists (kill(2) with signal 0; EPERM: it exists but is another user's). */
function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); undefined when unavailable. */
function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 2, the command name, is in parentheses and may itself contain spaces and ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const value = fields[STAT_STARTTIME_INDEX];
    return value !== undefined && /^\d+$/.test(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Linux's boot id ({@link BOOT_ID_FILE}); undefined elsewhere. */
function bootId(): string | undefined {
  try {
    return readFileSync(BOOT_ID_FILE, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The lock file's owner, 'missing' when there is no file, 'unreadable' when it is not a lock this code wrote. */
function readLock(file: string): LockOwner | 'missing' | 'unreadable' {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw err;
  }
  try {
    const o = JSON.parse(text) as Partial<Record<keyof LockOwner, unknown>>;
    const nullableString = (v: unknown): boolean => v === null || typeof v === 'string';
    if (
      Number.isSafeInteger(o.pid) && (o.pid as number) > 0 &&
      nullableString(o.startTime) && nullableString(o.bootId) &&
      typeof o.hostname === 'string' && typeof o.command === 'string' && typeof o.since === 'string' && typeof o.token === 'string' && o.token !== ''
    ) {
      return o as unknown as LockOwner;
    }
  } catch {
    /* not JSON */
  }
  return 'unreadable';
}

/** Writes `owner` to a new temporary file beside `target` (flushed to disk) and returns its path. */
function writeTemporary(target: string, owner: LockOwner): string {
  const temporary = `${target}.${process.pid}.${randomBytes(TEMPORARY_SUFFIX_BYTES).toString('hex')}.tmp`;
  const fd = openSync(temporary, 'wx', FILE_MODE);
  try {
    writeSync(fd, `${JSON.stringify(owner)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return temporary;
}

/**
 * Creates `target` holding `owner` if it does not exist: link(2) of a complete temporary file,
 * which fails if `target` exists; where hard links are not supported, open(2) with O_EXCL.
 * @returns false when `target` exists.
 */
function createExclusive(target: string, owner: LockOwner): boolean {
  const temporary = writeTemporary(target, owner);
  try {
    linkSync(temporary, target);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code === 'EEXIST') return false;
    if (!LINK_UNSUPPORTED.has(code)) throw err;
  } finally {
    rmSync(temporary, { force: true });
  }
  let fd: number;
  try {
    fd = openSync(target, 'wx', FILE_MODE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    writeSync(fd, `${JSON.stringify(owner)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Atomically replaces `target` by a file holding `owner` (rename(2) of a complete temporary file). */
function replace(target: string, owner: LockOwner): void {
  const temporary = writeTemporary(target, owner);
  try {
    renameSync(temporary, target);
  } catch (err) {
    rmSync(temporary, { force: true });
    throw err;
  }
}

/** Deletes temporary files (`<lock>.<pid>.<random>.tmp`) left by processes that died between writing and linking them. */
function sweepTemporaryFiles(dataDir: string): void {
  // The lock file's and the takeover claims' temporary files: `<name>.<pid>.<random hex>.tmp`.
  const pattern = new RegExp(`^${DATA_DIR_LOCK_FILE.replace('.', '\\.')}\\.(?:.*\\.)?(\\d+)\\.[0-9a-f]{${TEMPORARY_SUFFIX_BYTES * 2}}\\.tmp$`);
  for (const name of readdirSync(dataDir)) {
    const pid = Number(pattern.exec(name)?.[1]);
    if (!Number.isSafeInteger(pid) || pid === process.pid || pidExists(pid)) continue;
    try {
      // Only files older than this process: a new process reusing the pid writes newer ones.
      if (statSync(path.join(dataDir, name)).mtimeMs < Date.now() - process.uptime() * MS_PER_SECOND) rmSync(path.join(dataDir, name), { force: true });
    } catch {
      /* gone already */
    }
  }
}
