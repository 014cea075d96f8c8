// A PostgreSQL server of the benchmark's own: a throw-away cluster made with the machine's
// PostgreSQL binaries (initdb, pg_ctl), listening on a free port of 127.0.0.1 only, with the
// settings a deployment of the measured size would have (docs/operations.md, "Sizing on paper";
// docs/performance.md, "Notes for operators"), so that a measurement at a million users is not a
// measurement of a default sized for a laptop.
// Used by `npm run bench:scale` (bench/scale.mjs); stopped and deleted at the end of the run.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './lib.mjs';

/**
 * The directory of the PostgreSQL server binaries: `BENCH_PG_BINDIR`, else `pg_config --bindir`,
 * else the newest `/usr/lib/postgresql/<major>/bin` (Debian's layout). Throws when none holds
 * `initdb` and `pg_ctl`.
 */
export function postgresBinDir() {
  const candidates = [];
  if (process.env.BENCH_PG_BINDIR) candidates.push(process.env.BENCH_PG_BINDIR);
  const pgConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (pgConfig.status === 0) candidates.push(pgConfig.stdout.trim());
  if (existsSync('/usr/lib/postgresql')) {
    const majors = readdirSync('/usr/lib/postgresql').filter((d) => /^\d+$/.test(d)).sort((a, b) => Number(b) - Number(a));
    candidates.push(...majors.map((m) => `/usr/lib/postgresql/${m}/bin`));
  }
  const found = candidates.find((dir) => existsSync(path.join(dir, 'initdb')) && existsSync(path.join(dir, 'pg_ctl')));
  if (found === undefined) throw new Error('no PostgreSQL server binaries (initdb, pg_ctl) found: set BENCH_PG_BINDIR, or BENCH_SCALE_SHARED_BUFFERS=server to use the machine\'s server');
  return found;
}

/**
 * Huge pages the operating system holds reserved and not yet taken (`HugePages_Free` less
 * `HugePages_Rsvd` of /proc/meminfo), or 0 where it says nothing of them.
 */
function freeHugePages() {
  const meminfo = existsSync('/proc/meminfo') ? readFileSync('/proc/meminfo', 'utf8') : '';
  const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(meminfo)?.[1] ?? 0);
  return field('HugePages_Free') - field('HugePages_Rsvd');
}

/**
 * Makes and starts a PostgreSQL cluster in a new directory under the system's temporary
 * directory (on the same filesystem as the machine's server, usually: its WAL is flushed to the
 * same kind of disk), trust authentication for the superuser `postgres`, TCP on 127.0.0.1 only (no
 * Unix socket), with `settings` (name to value, passed as `-c name=value`). When this process runs
 * as root, which initdb refuses, the cluster belongs to the system user `postgres` and its
 * commands run through `runuser`.
 *
 * Its shared memory goes on huge pages when `hugePages` is `auto` and the operating system has
 * enough of them reserved and free, or when it is `on` (the start fails otherwise): with
 * `shared_buffers` of gigabytes on 4 kB pages, every random page a statement touches costs
 * address-translation misses, and the larger database pays for them most (docs/performance.md,
 * "At a million users"). The number needed is PostgreSQL's own
 * (`postgres -C shared_memory_size_in_huge_pages`, PostgreSQL 15 and later).
 * @param hugePages `auto`, `on` or `off`.
 * @returns `{ adminUrl, dir, stop, hugePages }`: the superuser's URL of its `postgres` database;
 *   the directory (data in `data/`, the server's log in `server.log`); a function that stops the
 *   server (fast shutdown, waiting) and deletes the directory, and can be called more than once;
 *   and `{ used, needed, free }`, whether the server runs on huge pages, how many it needs (null
 *   when this PostgreSQL cannot say) and how many were free before it started.
 */
export async function startOwnPostgres(settings, { hugePages = 'auto' } = {}) {
  const bin = postgresBinDir();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'latchkey-scale-postgres-'));
  const dataDir = path.join(dir, 'data');
  const logFile = path.join(dir, 'server.log');
  const run = (command, args) => {
    const file = path.join(bin, command);
    const [exe, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args];
    return execFileSync(exe, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  };
  let stopped = false;
  let started = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    if (started) {
      try {
        run('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', '-t', '120', 'stop']);
      } catch {
        // already down
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (asRoot) {
      const id = (flag) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(dir, id('-u'), id('-g'));
    }
    run('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-instructions']);
    const port = await freePort();
    const assignments = Object.entries(settings).map(([name, value]) => `${name}=${value}`);
    let needed = null;
    try {
      needed = Number(run('postgres', ['-D', dataDir, ...assignments.flatMap((a) => ['-c', a]), '-C', 'shared_memory_size_in_huge_pages']).trim());
    } catch {
      // PostgreSQL before 15 has no such parameter
    }
    const free = freeHugePages();
    const used = hugePages === 'on' || (hugePages === 'auto' && needed !== null && needed > 0 && free >= needed);
    const options = [`-c port=${port}`, "-c listen_addresses='127.0.0.1'", "-c unix_socket_directories=''", ...assignments.map((a) => `-c ${a}`), `-c huge_pages=${used ? 'on' : 'off'}`].join(' ');
    started = true;
    run('pg_ctl', ['-D', dataDir, '-l', logFile, '-o', options, '-w', '-t', '120', 'start']);
    return { adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`, dir, stop, hugePages: { used, needed, free } };
  } catch (error) {
    stop();
    throw error;
  }
}
