// Shared pieces of the benchmark (bench/run.mjs) and the profiler (bench/profile.mjs): the
// machine check, the PostgreSQL database, the service and reference child processes, the test
// data, the scenarios and one autocannon measurement. Every loop here is bounded (a count or a
// deadline), and every request goes to 127.0.0.1.
import { spawn, spawnSync } from 'node:child_process';
import { createHash, createHmac, generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { assertion, BENCH_ORIGIN, createPasskey } from './passkey.mjs';

/** The repository root (bench/..). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/**
 * The PostgreSQL server as the superuser, where the benchmark creates and drops its own
 * databases: the machine's server (`BENCH_ADMIN_URL`), unless a benchmark started a server of its
 * own ({@link useAdminUrl}).
 */
export let ADMIN_URL = process.env.BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** Makes `url` the server of {@link ADMIN_URL} for the rest of the process (bench/postgres-server.mjs). */
export function useAdminUrl(url) {
  ADMIN_URL = url;
}
/** Every benchmark user has this password: a passphrase the password policy accepts. */
export const PASSWORD = 'correct horse battery staple';
/** Users (and sessions) per pool: one per connection at the highest concurrency measured. */
export const POOL_USERS = 32;
/**
 * Users with TOTP for the `mfa` scenario. Each gives 9 recovery codes per measurement (the 10th
 * makes the next set), so 9 times this many two-step sign-ins can complete in one measurement:
 * more than the argon2id-bound sign-in rate of a 2-core machine reaches in 10 s.
 */
export const MFA_USERS = 160;
/** Sessions of the user whose `GET /sessions` is measured. */
export const LISTED_SESSIONS = 10;
/** Longest wait for a child process to answer HTTP after it was spawned. */
const READY_TIMEOUT_MS = 30_000;
/** Interval between readiness probes: fine enough to time a start of a few hundred milliseconds. */
const READY_POLL_MS = 5;
/** Longest wait for a child to exit after SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 15_000;
/** Parallel requests while preparing users and sessions (not timed). */
const PREPARE_CONCURRENCY = 4;
/**
 * Rate limits as in production, but the per-IP ones raised to their highest value, since every
 * request comes from 127.0.0.1: the counters are still written on every sign-in and sign-up (a
 * sign-in's taken back once its password is right), so the benchmark pays what production pays,
 * but one IP carrying all the load is never refused. With the defaults, the 20 sign-ups per IP
 * and hour refuse all but the first 20, and the 50 per IP for sign-ins are exceeded by the
 * sign-ins still in flight from the warm-up plus the 32 of the measurement (each counts until
 * its password is checked); a refused one is never taken back, so the IP stays locked. The
 * per-identifier limit stays at its default (docs/performance.md).
 */
export const BENCH_RATE_LIMITS = {
  RATE_LIMIT_SIGN_IN_PER_IP: '1000000',
  RATE_LIMIT_SIGN_UP_PER_IP: '1000000',
  // One IP sends every password-reset request of the `reset` scenario.
  RATE_LIMIT_PASSWORD_RESET_PER_IP: '1000000',
  // One IP sends every second step of the `mfa` scenario.
  RATE_LIMIT_MFA_PER_IP: '1000000',
  // One admin API key sends every request of the `admin-*` scenarios; its count is still written.
  RATE_LIMIT_ADMIN_PER_KEY: '1000000',
};

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A number from the environment, or `fallback` when unset. */
export function envNumber(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name}: expected a non-negative number, got "${raw}"`);
  return value;
}

export function median(values) {
  const xs = values.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return null;
  const mid = Math.floor(xs.length / 2);
  return xs.length % 2 === 1 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
}

/** The `p`-th percentile (0 to 100) of sorted `xs`, nearest rank. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export function log(message) {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** The 1-, 5- and 15-minute load averages. */
export function loadAverage() {
  const [one, five, fifteen] = readFileSync('/proc/loadavg', 'utf8').split(' ').map(Number);
  return { one, five, fifteen };
}

/**
 * Waits until the 1-minute load is below `maxLoad` (other engineers run test suites on the
 * same cores), polling every `pollSeconds`, for at most `timeoutSeconds`.
 * @returns the load before and after, the seconds waited, and whether the machine was quiet.
 */
export async function waitForQuiet({ maxLoad, timeoutSeconds, pollSeconds }) {
  const before = loadAverage();
  const started = Date.now();
  let now = before;
  const polls = Math.ceil(timeoutSeconds / pollSeconds);
  for (let i = 0; i < polls && now.one >= maxLoad; i++) {
    log(`machine busy (1-min load ${now.one} >= ${maxLoad}); waiting ${pollSeconds} s (${Math.round((Date.now() - started) / 1000)} s of at most ${timeoutSeconds} s)`);
    await sleep(pollSeconds * 1000);
    now = loadAverage();
  }
  const quiet = now.one < maxLoad;
  if (!quiet) log(`machine still busy after ${timeoutSeconds} s (1-min load ${now.one}); measuring anyway, the load is recorded`);
  return { before, after: now, waitedSeconds: Math.round((Date.now() - started) / 1000), quiet, maxLoad };
}

/** Starts the machine's PostgreSQL cluster when it does not answer (as .ci/run does). */
export async function ensurePostgres() {
  const ready = () => spawnSync('pg_isready', ['-h', '127.0.0.1', '-p', '5432', '-q']).status === 0;
  if (ready()) return;
  const version = spawnSync('ls', ['/etc/postgresql'], { encoding: 'utf8' }).stdout.trim().split('\n')[0];
  log(`starting PostgreSQL ${version}`);
  spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'start'], { stdio: 'inherit' });
  for (let i = 0; i < 30 && !ready(); i++) await sleep(1000);
  if (!ready()) throw new Error('PostgreSQL does not answer on 127.0.0.1:5432');
}

/** Runs `fn` with a client on `url`, closed afterwards. */
export async function withClient(url, fn) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The server's version string (`SHOW server_version`). */
export async function postgresVersion() {
  return withClient(ADMIN_URL, async (c) => (await c.query('SHOW server_version')).rows[0].server_version);
}

/** Creates the database `name` on the machine's server; returns its URL. */
export async function createDatabase(name) {
  await withClient(ADMIN_URL, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(name) {
  await withClient(ADMIN_URL, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

/** Writes a fresh RSA-2048 signing key for this run (PKCS#8 PEM, mode 0600); returns its path. */
export function writeSigningKey(dir) {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
  const file = path.join(dir, 'jwt-signing-key.pem');
  writeFileSync(file, privateKey, { mode: 0o600 });
  return file;
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS_PER_SECOND = 100;

/** The fields of /proc/<pid>[/task/<tid>]/stat after the command name (which may hold spaces): [0] state, [1] ppid, [11] utime, [12] stime, [13] cutime, [14] cstime. */
function statFields(statFile) {
  return readFileSync(statFile, 'utf8').split(') ')[1].split(' ');
}

/** utime + stime of /proc/<pid>[/task/<tid>]/stat, in seconds. */
export function cpuSecondsOf(statFile) {
  const fields = statFields(statFile);
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

/**
 * CPU seconds so far of the PostgreSQL server: every live postgres process, plus what the
 * postmaster's children that have ended used (its cutime and cstime), so that backends closing
 * between two readings (the pools' idle timeouts) do not take their time away with them.
 */
function postgresCpuSeconds() {
  const pids = spawnSync('pgrep', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim().split('\n').filter((pid) => pid !== '');
  const stats = [];
  for (const pid of pids) {
    try {
      stats.push(statFields(`/proc/${pid}/stat`));
    } catch {
      // the process ended meanwhile: its time is in the postmaster's cutime once it is reaped
    }
  }
  let seconds = 0;
  for (const fields of stats) {
    seconds += (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
    // The postmaster is the one whose parent is not a postgres process.
    if (!pids.includes(fields[1])) seconds += (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS_PER_SECOND;
  }
  return seconds;
}

/**
 * CPU time so far, in seconds, of: the service's main thread (its event loop), its other threads
 * (libuv's pool: argon2id and RS256 signatures; V8's helpers), every PostgreSQL process, this
 * process (the load generator), and the machine (all CPUs: busy and idle, from /proc/stat).
 * The difference of two snapshots divided by the requests answered meanwhile is the CPU per
 * request each part costs: steadier than req/s when other work shares the cores.
 */
export function cpuSnapshot(servicePid) {
  let mainThread = 0;
  let otherThreads = 0;
  for (const tid of readdirSync(`/proc/${servicePid}/task`)) {
    const seconds = cpuSecondsOf(`/proc/${servicePid}/task/${tid}/stat`);
    if (Number(tid) === servicePid) mainThread = seconds;
    else otherThreads += seconds;
  }
  const postgres = postgresCpuSeconds();
  const usage = process.cpuUsage();
  const machine = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return {
    mainThread,
    otherThreads,
    postgres,
    loadGenerator: (usage.user + usage.system) / 1e6,
    idle: (machine[3] + machine[4]) / CLOCK_TICKS_PER_SECOND,
    total: machine.reduce((a, b) => a + b, 0) / CLOCK_TICKS_PER_SECOND,
  };
}

/** The parts of a {@link cpuSnapshot}, in the order the docs list them. */
const CPU_PARTS = ['mainThread', 'otherThreads', 'postgres', 'loadGenerator', 'idle', 'total'];

/** CPU seconds of each part spent between two {@link cpuSnapshot}s. */
export function cpuDelta(before, after) {
  return Object.fromEntries(CPU_PARTS.map((key) => [key, after[key] - before[key]]));
}

/** The sum of {@link cpuDelta}s (several slices of one measurement). */
export function addCpu(deltas) {
  return Object.fromEntries(CPU_PARTS.map((key) => [key, deltas.reduce((sum, d) => sum + d[key], 0)]));
}

/**
 * Microseconds of CPU per answered request of each part, from a {@link cpuDelta}, plus `other`:
 * the rest of the busy machine (the kernel's work outside these processes, other programs).
 */
export function cpuPerRequest(delta, requests) {
  const result = Object.fromEntries(CPU_PARTS.map((key) => [key, requests > 0 ? (delta[key] * 1e6) / requests : null]));
  result.other = result.total === null ? null : result.total - CPU_PARTS.slice(0, 5).reduce((a, key) => a + result[key], 0);
  return result;
}

/**
 * One side's measurement made of several slices (bench/run.mjs alternates service and reference
 * slices): rates over the summed time, percentiles over every slice's latencies, counts summed,
 * CPU per request over the summed CPU when the slices carry `cpu` deltas.
 */
export function combineSlices(slices) {
  const sum = (key) => slices.reduce((a, s) => a + (s[key] ?? 0), 0);
  const seconds = sum('seconds');
  const ok = sum('ok');
  const latencies = slices.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const statusCodes = {};
  for (const s of slices) for (const [code, count] of Object.entries(s.statusCodes ?? {})) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  const cpu = slices.every((s) => s.cpu !== undefined) ? cpuPerRequest(addCpu(slices.map((s) => s.cpu)), ok) : undefined;
  return {
    connections: slices[0].connections,
    slices: slices.length,
    seconds,
    reqPerSec: seconds > 0 ? ok / seconds : 0,
    sliceReqPerSec: slices.map((s) => (s.seconds > 0 ? s.ok / s.seconds : 0)),
    requests: sum('requests'),
    ok,
    p50Ms: percentile(latencies, 50),
    p90Ms: percentile(latencies, 90),
    p99Ms: percentile(latencies, 99),
    maxMs: latencies.at(-1) ?? null,
    errors: sum('errors'),
    timeouts: sum('timeouts'),
    non2xx: sum('non2xx'),
    statusCodes,
    ...(cpu === undefined ? {} : { cpuMicrosecondsPerRequest: cpu }),
  };
}

/** VmHWM (peak resident set) and VmRSS of a process, in MiB, from /proc/<pid>/status. */
export function memoryOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { peakRssMiB: kib('VmHWM') / 1024, rssMiB: kib('VmRSS') / 1024 };
  } catch {
    return { peakRssMiB: null, rssMiB: null };
  }
}

/** One GET to 127.0.0.1; resolves with the status, or rejects (connection refused while starting). */
function probe(port, urlPath) {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: urlPath, method: 'GET', agent: false, timeout: 1000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('timeout', () => req.destroy(new Error('probe timeout')));
    req.on('error', reject);
    req.end();
  });
}

/**
 * Spawns `node <args>` and waits for the first successful (2xx) answer to `GET readyPath` on
 * `port`, probing every {@link READY_POLL_MS} ms for at most {@link READY_TIMEOUT_MS} ms.
 * @returns the child and the milliseconds from spawn to that first answer.
 */
async function spawnUntilReady({ args, env, port, readyPath, logFile, readyTimeoutMs = READY_TIMEOUT_MS }) {
  const out = createWriteStream(logFile, { flags: 'a' });
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(out, { end: false });
  child.stderr.pipe(out, { end: false });
  let exited = null;
  child.once('exit', (code, signal) => (exited = { code, signal }));
  const deadline = started + readyTimeoutMs;
  while (performance.now() < deadline) {
    if (exited !== null) throw new Error(`${args.join(' ')} exited (${JSON.stringify(exited)}) before answering; see ${logFile}`);
    try {
      const status = await probe(port, readyPath);
      if (status >= 200 && status < 300) {
        const readyMs = performance.now() - started;
        return { child, readyMs, pid: child.pid, url: `http://127.0.0.1:${port}`, logFile, stop: () => stopChild(child) };
      }
    } catch {
      // not listening yet
    }
    await sleep(READY_POLL_MS);
  }
  child.kill('SIGKILL');
  throw new Error(`${args.join(' ')} did not answer within ${readyTimeoutMs} ms; see ${logFile}`);
}

/**
 * The child processes a benchmark started, to stop together on the way out whatever happens:
 * `track(started)` records a started child (what {@link startService} and the like return) until
 * it exits, and returns it; `stopAll()` stops those still running.
 */
export function childProcesses() {
  const children = new Set();
  return {
    track(started) {
      children.add(started.child);
      started.child.once('exit', () => children.delete(started.child));
      return started;
    },
    stopAll: () => Promise.all([...children].map((child) => stopChild(child))),
  };
}

/** SIGTERM, then SIGKILL after {@link STOP_TIMEOUT_MS}; resolves with the exit code. */
export function stopChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    child.kill('SIGTERM');
  });
}

/** The environment of the service: this process's, minus the service's own settings, plus the benchmark's (the passkey origin, rate limits) and `settings`. */
export function serviceEnv(settings) {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (/^(DATABASE_URL|DATA_DIR|JWT_|SMTP_|RATE_LIMIT_|PORT$|HOST$|METRICS_PORT$|ADMIN_PORT$|ADMIN_HOST$|LOG_LEVEL$|MIGRATE_ON_START$|DEMO_PAGE$|CORS_ORIGINS$|TRUST_PROXY$)/.test(name)) delete env[name];
  }
  // The software passkey (bench/passkey.mjs) signs for BENCH_ORIGIN; the default origin follows PORT.
  return { ...env, HOST: '127.0.0.1', LOG_LEVEL: 'warn', WEBAUTHN_ORIGINS: BENCH_ORIGIN, ...BENCH_RATE_LIMITS, ...settings };
}

/**
 * The Node.js flags `npm start` runs the service with (package.json's `start` script, the
 * production launcher: heap limits), so the benchmark measures the service as it
 * runs in production. Throws when the script no longer has the form
 * `node <flags> dist/service/main.js`.
 */
export function serviceNodeFlags() {
  const start = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts.start;
  const match = /^node((?: --[a-z-]+(?:=\S+)?)*) dist\/service\/main\.js$/.exec(start);
  if (match === null) throw new Error(`package.json scripts.start is not "node <flags> dist/service/main.js": ${start}`);
  return match[1].trim().split(' ').filter((flag) => flag !== '');
}

/**
 * Starts the built service as `npm start` does (`node <its flags> dist/service/main.js`, the
 * bundle, or another build's `script`) with `env`; `nodeArgs` go before the script too
 * (`--cpu-prof`). Ready means its first successful HTTP answer (GET /healthz). The admin API
 * listens on a port of its own (`adminUrl`), for the `admin-*` scenarios.
 */
export async function startService({ env, nodeArgs = [], logFile, script = 'dist/service/main.js' }) {
  const port = await freePort();
  const adminPort = await freePort();
  const started = await spawnUntilReady({ args: [...serviceNodeFlags(), ...nodeArgs, script], env: { ...env, PORT: String(port), ADMIN_PORT: String(adminPort) }, port, readyPath: '/healthz', logFile });
  return { ...started, adminUrl: `http://127.0.0.1:${adminPort}` };
}

/**
 * Starts the floor server (bench/floor-server.mjs) with the service's environment `env`
 * (database, signing key, argon2id parameters, issuer, audience, lifetimes); `nodeArgs` go
 * before the script (`--cpu-prof`).
 */
export async function startFloor({ env, nodeArgs = [], logFile }) {
  const port = await freePort();
  return spawnUntilReady({ args: [...nodeArgs, 'bench/floor-server.mjs'], env: { ...env, PORT: String(port) }, port, readyPath: '/healthz', logFile });
}

/** Starts a reference server of bench/reference-server.mjs (`empty` or `pk <table> <ids file>`). */
export async function startReference({ args, env, logFile }) {
  const port = await freePort();
  // The PGlite reference fills its table before it listens: allow it minutes, not seconds.
  return spawnUntilReady({ args: ['bench/reference-server.mjs', ...args], env: { ...env, PORT: String(port) }, port, readyPath: args[0] === 'empty' ? '/' : '/0', logFile, readyTimeoutMs: 10 * READY_TIMEOUT_MS });
}

/** The identity provider the `oauth-*` scenarios sign in with: its id in OAUTH_PROVIDERS. */
export const OAUTH_PROVIDER = 'github';
/** The service's public URL in the `oauth-*` scenarios: only the callback URL registered at the provider is built from it (the benchmark sends the callback to the service itself). */
const OAUTH_PUBLIC_URL = 'http://127.0.0.1:3000';
/** The app page a provider sign-in returns to (OAUTH_REDIRECT_URLS). */
const OAUTH_APP_PAGE = 'https://app.bench.example/welcome';

/**
 * Starts the GitHub-compatible provider (bench/github-server.mjs) on 127.0.0.1.
 * @returns the child, and `serviceSettings`: the OAUTH_* and PUBLIC_URL settings that make it the
 * service's `github` provider (README "Configuration").
 */
export async function startGithub({ logFile }) {
  const port = await freePort();
  const clientId = 'Iv1.benchclient';
  const clientSecret = randomBytes(20).toString('hex');
  const env = {
    ...process.env,
    PORT: String(port),
    BENCH_GITHUB_CLIENT_ID: clientId,
    BENCH_GITHUB_CLIENT_SECRET: clientSecret,
    BENCH_GITHUB_REDIRECT_URI: `${OAUTH_PUBLIC_URL}/auth/v0/oauth/${OAUTH_PROVIDER}/callback`,
  };
  const started = await spawnUntilReady({ args: ['bench/github-server.mjs'], env, port, readyPath: '/healthz', logFile });
  const serviceSettings = {
    PUBLIC_URL: OAUTH_PUBLIC_URL,
    OAUTH_PROVIDERS: OAUTH_PROVIDER,
    OAUTH_GITHUB_URL: started.url,
    OAUTH_GITHUB_API_URL: `${started.url}/api/v3`,
    OAUTH_GITHUB_CLIENT_ID: clientId,
    OAUTH_GITHUB_CLIENT_SECRET: clientSecret,
    OAUTH_REDIRECT_URLS: OAUTH_APP_PAGE,
  };
  return { ...started, serviceSettings };
}

/** Runs bench/argon2-ceiling.mjs in a child process with `env` (the service's thread pool size). */
export function argon2Ceiling({ op, parallel, seconds, warmupSeconds, env }) {
  const run = spawnSync(process.execPath, ['bench/argon2-ceiling.mjs', op, String(parallel), String(seconds), String(warmupSeconds)], {
    cwd: ROOT,
    env,
    encoding: 'utf8',
    timeout: (seconds + warmupSeconds + 60) * 1000,
  });
  if (run.status !== 0) throw new Error(`argon2-ceiling failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').pop());
}

/** The pattern of each cookie name {@link cookieOf} was asked for, compiled once (it runs on every response). */
const cookiePatterns = new Map();

/** The value of cookie `name` (a base64url token) from a response's `set-cookie` header(s), or undefined. */
export function cookieOf(setCookie, name) {
  let pattern = cookiePatterns.get(name);
  if (pattern === undefined) cookiePatterns.set(name, (pattern = new RegExp(`(?:^|,\\s*)${name}=([A-Za-z0-9_-]+)`)));
  for (const line of [setCookie].flat()) {
    const match = typeof line === 'string' ? pattern.exec(line) : null;
    if (match) return match[1];
  }
  return undefined;
}

/** The refresh token from a response's `set-cookie` header(s), or undefined. */
export const refreshTokenOf = (setCookie) => cookieOf(setCookie, 'refresh_token');

/** The RFC 6238 code (SHA-1, 6 digits, 30 s) of a base32 `secret` now: the bench's own, as an authenticator app computes it. */
export function totpNow(secret) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  const key = [];
  for (const ch of secret) {
    value = (value << 5) | alphabet.indexOf(ch);
    bits += 5;
    if (bits >= 8) {
      key.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 30_000)));
  const mac = createHmac('sha1', Buffer.from(key)).update(counter).digest();
  const o = mac[mac.length - 1] & 0x0f;
  return String((((mac[o] & 0x7f) << 24) | (mac[o + 1] << 16) | (mac[o + 2] << 8) | mac[o + 3]) % 1_000_000).padStart(6, '0');
}

/** The few API calls the preparation needs (through fetch, to 127.0.0.1 only). */
export function apiClient(baseUrl) {
  const call = async (method, urlPath, { body, headers = {} } = {}) => {
    const res = await fetch(`${baseUrl}/auth/v0${urlPath}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text === '' ? null : JSON.parse(text), cookie: refreshTokenOf(res.headers.getSetCookie()) };
  };
  const expect = (res, status, what) => {
    if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${JSON.stringify(res.json)}`);
    return res;
  };
  return {
    /** The service's base URL. */
    baseUrl,
    async signUp(username, phone) {
      const res = await call('POST', '/sign-up', { body: { username, phone, password: PASSWORD } });
      if (res.status !== 201 && res.json?.code !== 'auth.sign_up.username_taken') expect(res, 201, `sign-up ${username}`);
    },
    /** A new session: its refresh token and access token. */
    async signIn(username) {
      const res = expect(await call('POST', '/sign-in', { body: { username, password: PASSWORD } }), 200, `sign-in ${username}`);
      return { refreshToken: res.cookie, accessToken: res.json.tokens.access_token };
    },
    /**
     * Turns TOTP on for `username` (signed in with `session`): setup, then enable with the
     * current code. @returns the recovery codes.
     */
    async enrolTotp(session) {
      const bearer = { authorization: `Bearer ${session.accessToken}` };
      const setup = expect(await call('POST', '/mfa/totp/setup', { body: { password: PASSWORD }, headers: bearer }), 200, 'totp setup');
      const enable = expect(await call('POST', '/mfa/totp/enable', { body: { code: totpNow(setup.json.secret) }, headers: bearer }), 200, 'totp enable');
      return enable.json.recovery_codes;
    },
    /** New recovery codes for the user of `accessToken`, with one unused code of the old set. */
    async regenerateRecoveryCodes(accessToken, code) {
      const res = await call('POST', '/mfa/recovery-codes', { body: { password: PASSWORD, code }, headers: { authorization: `Bearer ${accessToken}` } });
      return expect(res, 200, 'recovery codes').json.recovery_codes;
    },
    /** Registers a new software passkey (bench/passkey.mjs) for the user of `accessToken`; @returns its credential. */
    async registerPasskey(accessToken) {
      const bearer = { authorization: `Bearer ${accessToken}` };
      const options = expect(await call('POST', '/passkeys/registration/options', { headers: bearer }), 200, 'passkey options').json;
      const { credential, response } = createPasskey(options);
      expect(await call('POST', '/passkeys/registration', { body: { response }, headers: bearer }), 201, 'passkey registration');
      return credential;
    },
    /** Rotates a session's refresh token: the new refresh token and a fresh access token. */
    async refresh(refreshToken) {
      const res = expect(await call('POST', '/refresh', { headers: { cookie: `refresh_token=${refreshToken}` } }), 200, 'refresh');
      return { refreshToken: res.cookie, accessToken: res.json.tokens.access_token };
    },
  };
}

/** Runs `fn` over `items` with at most `limit` calls in flight; results in order. */
export async function mapLimit(items, limit, fn) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) results[i] = await fn(items[i], i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** A phone number in the stored form, unique per (prefix, i): `+<prefix><i padded to 10 digits>`. */
const phoneOf = (prefix, i) => `+${prefix}${String(i).padStart(10, '0')}`;

/**
 * Inserts `count` users, each with one device, one active session and one live refresh token,
 * straight into the database (not through the API: the point is the size of the tables the
 * measured statements search, not argon2id). Works on PostgreSQL and PGlite alike.
 */
export async function insertBallast(query, count, passwordHash) {
  if (count <= 0) return;
  await query(
    `INSERT INTO users (id, username, email, phone, password_hash, is_email_verified, created_at, updated_at)
     SELECT gen_random_uuid(), 'ballast_' || g, NULL, '+40' || lpad(g::text, 10, '0'), $1, false, now(), now()
       FROM generate_series(1, ${Number(count)}) g`,
    [passwordHash],
  );
  await query(
    `INSERT INTO devices (id, user_id, ip, user_agent, created_at)
     SELECT gen_random_uuid(), u.id, '127.0.0.1', 'ballast', now() FROM users u WHERE u.username LIKE 'ballast\\_%'`,
  );
  await query(
    `INSERT INTO sessions (id, user_id, device_id, ip, user_agent, created_at, last_used_at, expires_at)
     SELECT gen_random_uuid(), d.user_id, d.id, d.ip, d.user_agent, now(), now(), now() + interval '30 days'
       FROM devices d WHERE d.user_agent = 'ballast'`,
  );
  await query(
    `INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at)
     SELECT gen_random_uuid(), s.id, encode(sha256(s.id::text::bytea), 'base64'), NULL, now()
       FROM sessions s WHERE s.user_agent = 'ballast'`,
  );
  await query('ANALYZE');
}

/**
 * The benchmark's users, created through the API once per database (phone-only, so no email
 * verification is needed): pools of {@link POOL_USERS} for `/me`, sign-in and refresh, and one
 * user with {@link LISTED_SESSIONS} sessions for `GET /sessions`.
 */
export async function prepareUsers(api) {
  const names = (prefix, phonePrefix, n) => Array.from({ length: n }, (_, i) => ({ username: `${prefix}_${i}`, phone: phoneOf(phonePrefix, i) }));
  const me = names('me', 51, POOL_USERS);
  const signIn = names('si', 53, POOL_USERS);
  const refresh = names('rf', 54, POOL_USERS);
  const lister = { username: 'lister', phone: phoneOf(52, 0) };
  const mfa = names('mf', 55, MFA_USERS);
  const passkey = names('pk', 56, POOL_USERS);
  await mapLimit([...me, ...signIn, ...refresh, lister, ...mfa, ...passkey], PREPARE_CONCURRENCY, (u) => api.signUp(u.username, u.phone));
  const passkeys = await mapLimit(passkey, PREPARE_CONCURRENCY, async (u) => api.registerPasskey((await api.signIn(u.username)).accessToken));
  // TOTP users: each keeps a session (to make new recovery codes) and its set of codes.
  const mfaUsers = await mapLimit(mfa, PREPARE_CONCURRENCY, async (u) => {
    const session = await api.signIn(u.username);
    return { username: u.username, session, codes: await api.enrolTotp(session) };
  });
  const meSessions = await mapLimit(me, PREPARE_CONCURRENCY, (u) => api.signIn(u.username));
  const listerSessions = await mapLimit(Array.from({ length: LISTED_SESSIONS }), PREPARE_CONCURRENCY, () => api.signIn(lister.username));
  return {
    meSessions,
    listerSessions,
    signInUsers: signIn.map((u) => u.username),
    refreshUsers: refresh.map((u) => u.username),
    refreshPool: [],
    signUpSeq: 0,
    resetSeq: 0,
    mfaUsers,
    mfaPool: [],
    passkeys,
    oauth: { pool: [], accountSeq: 0, rate: OAUTH_INITIAL_RATE, sliceUsed: 0, sliceRanDry: 0, sliceStarted: 0, failed: 0 },
  };
}

/**
 * Makes a new set of recovery codes for every TOTP user (with the last unused code of its set;
 * its session refreshed first) and fills the `mfa` scenario's pool with 9 codes of each: every
 * code is presented once, and the rest of an old set dies with it.
 */
export async function refillMfaPool(api, data) {
  await mapLimit(data.mfaUsers, PREPARE_CONCURRENCY, async (u) => {
    u.session = await api.refresh(u.session.refreshToken);
    u.codes = await api.regenerateRecoveryCodes(u.session.accessToken, u.codes.at(-1));
  });
  data.mfaPool = data.mfaUsers.flatMap((u) => u.codes.slice(0, -1).map((code) => ({ username: u.username, code })));
}

/** GitHub accounts the `oauth-callback` scenario signs in with, round robin: one per connection at 32. */
const OAUTH_ACCOUNTS = POOL_USERS;
/** Callbacks per second assumed before the first slice of `oauth-callback` has measured the rate. */
const OAUTH_INITIAL_RATE = 300;
/** Flows prepared beyond the rate times the slice's seconds: a faster slice must not run dry. */
const OAUTH_POOL_MARGIN = 1.5;
/** Flows older than this are dropped from the pool: well inside a flow's 10 minutes (FLOW_TTL_SECONDS), as passes can be further apart. */
const OAUTH_FLOW_KEEP_MS = 5 * 60_000;

/**
 * One flow up to the provider's return, as a browser makes it (not timed): the service's
 * authorize (302 to the provider and the `oauth_flow` cookie), then the provider's authorization
 * endpoint signed in as `login` (302 back to the callback with `code` and `state`).
 * @returns the callback's path with its query, and the flow cookie.
 */
async function oauthFlow(baseUrl, login) {
  const authorize = await fetch(`${baseUrl}/auth/v0/oauth/${OAUTH_PROVIDER}/authorize`, { redirect: 'manual' });
  const flowCookie = cookieOf(authorize.headers.getSetCookie(), 'oauth_flow');
  const atProvider = authorize.headers.get('location') ?? '';
  if (authorize.status !== 302 || flowCookie === undefined) throw new Error(`oauth authorize: expected 302 with oauth_flow, got ${authorize.status} ${await authorize.text()}`);
  if (!atProvider.startsWith('http://127.0.0.1:')) throw new Error(`oauth authorize: the provider is not on 127.0.0.1: ${atProvider}`);
  const provider = await fetch(atProvider, { redirect: 'manual', headers: { cookie: `gh_user=${login}` } });
  const back = provider.headers.get('location');
  if (provider.status !== 302 || back === null) throw new Error(`oauth provider: expected 302, got ${provider.status} ${await provider.text()}`);
  const callback = new URL(back);
  return { path: `${callback.pathname}${callback.search}`, cookie: `oauth_flow=${flowCookie}`, preparedAt: Date.now() };
}

/**
 * Tops the `oauth-callback` pool of flows up to what the coming slice of `seconds` should use at
 * the rate the last slice measured (times {@link OAUTH_POOL_MARGIN}); each is presented once.
 * Flows left over from a slice stay usable for {@link OAUTH_FLOW_KEEP_MS} (a flow lives 10
 * minutes, a code until exchanged); older ones are dropped.
 */
export async function fillOAuthPool(api, data, { connections, seconds }) {
  const o = data.oauth;
  o.pool = o.pool.filter((flow) => Date.now() - flow.preparedAt < OAUTH_FLOW_KEEP_MS);
  const target = Math.ceil(o.rate * seconds * OAUTH_POOL_MARGIN) + connections;
  const missing = Math.max(0, target - o.pool.length);
  const flows = await mapLimit(Array.from({ length: missing }), PREPARE_CONCURRENCY, () => oauthFlow(api.baseUrl, `bench-gh-${o.accountSeq++ % OAUTH_ACCOUNTS}`));
  o.pool.push(...flows);
  o.sliceUsed = 0;
  o.sliceRanDry = 0;
  o.sliceStarted = performance.now();
}

/** Rotates every session in `sessions` (in place) so that their access tokens are fresh. */
export async function freshenTokens(api, sessions) {
  const fresh = await mapLimit(sessions, PREPARE_CONCURRENCY, (s) => api.refresh(s.refreshToken));
  fresh.forEach((s, i) => (sessions[i] = s));
}

/**
 * Tops the pool of refresh tokens up to `size` live ones by signing in the refresh users.
 * Tokens that were in flight when a run stopped are dropped beforehand by the scenario: the
 * server may have rotated them, and presenting one again would be reuse.
 */
export async function fillRefreshPool(api, data, size) {
  const missing = Math.max(0, size - data.refreshPool.length);
  const sessions = await mapLimit(Array.from({ length: missing }), PREPARE_CONCURRENCY, (_, i) => api.signIn(data.refreshUsers[i % data.refreshUsers.length]));
  data.refreshPool.push(...sessions.map((s) => s.refreshToken));
}

const JSON_HEADERS = { 'content-type': 'application/json' };

/** Users the `admin-read` scenario reads, spread over the ballast. */
const ADMIN_READ_USERS = 1_000;

/**
 * What the `admin-*` scenarios need, straight in the database (the CLI makes keys the same way,
 * src/modules/admin/admin-keys.service.ts): an admin API key with `users:read` (only its
 * SHA-256 is stored), and the ids of {@link ADMIN_READ_USERS} ballast users.
 */
export async function prepareAdmin(query) {
  const id = randomUUID();
  const key = `lk_admin_${id.replaceAll('-', '')}_${randomBytes(32).toString('base64url')}`;
  await query(
    `INSERT INTO admin_api_keys (id, name, scopes, key_hash, created_at) VALUES ($1, 'bench', ARRAY['users:read'], $2, now())`,
    [id, createHash('sha256').update(key, 'utf8').digest('base64url')],
  );
  const { rows } = await query(`SELECT id FROM users WHERE username LIKE 'ballast\\_%' ORDER BY random() LIMIT ${ADMIN_READ_USERS}`);
  return { key, userIds: rows.map((r) => r.id) };
}

/**
 * The search prefixes of the `admin-search` scenario: `ballast_` and four digits, each matching
 * about 111 of 100 000 ballast users (one, ten and a hundred longer names), a page of 20 of them.
 */
function adminSearchPrefixes(count) {
  return Array.from({ length: count }, (_, i) => `ballast_${1000 + ((i * 7919) % 9000)}`);
}

/** `GET /me` with the Bearer tokens of the `me` sessions, round robin. */
function meRequests(data) {
  let i = 0;
  return [{ method: 'GET', path: '/auth/v0/me', setupRequest: (req) => ({ ...req, headers: { ...req.headers, authorization: `Bearer ${data.meSessions[i++ % data.meSessions.length].accessToken}` } }) }];
}

/**
 * The measured scenarios. `requests(data)` builds autocannon's request list; `prepare` runs
 * (untimed) before each measurement; `after` after it. `reference` names what the service is
 * compared with: a reference server (`empty`, `pk`), the argon2id ceiling (`hash`, `verify`), or
 * `floor`: bench/floor-server.mjs, the same route doing only the work a correct service cannot
 * avoid, measured with this scenario's own requests (and its `prepare` and `after`). The floors
 * run on PostgreSQL only; the embedded pass compares with `pgliteReference` instead.
 * `serviceSettings`: the scenario runs on a service of its own, started with these settings on
 * top of the others (PostgreSQL only: two processes cannot share an embedded database); a
 * function of the data when they are known at run time only (the `oauth-*` provider's URL).
 * `okStatuses`: the statuses that count as answered (default: 2xx), for a redirect.
 */
export const SCENARIOS = [
  {
    name: 'me',
    label: 'GET /auth/v0/me',
    reference: 'floor',
    pgliteReference: 'pk',
    prepare: (api, data) => freshenTokens(api, data.meSessions),
    requests: meRequests,
  },
  {
    // The same requests with the cache of verified access tokens off, so that the service
    // verifies every token in full, as the floor does: the like-for-like comparison
    // (docs/performance.md, change 12). `me` measures the cache's best case instead: 32 tokens,
    // every request but the first of each a hit.
    name: 'me-uncached',
    label: 'GET /auth/v0/me, token cache off',
    reference: 'floor',
    serviceSettings: { ACCESS_TOKEN_CACHE_SIZE: '0' },
    prepare: (api, data) => freshenTokens(api, data.meSessions),
    requests: meRequests,
  },
  {
    name: 'refresh',
    label: 'POST /auth/v0/refresh',
    reference: 'floor',
    pgliteReference: 'pk',
    prepare: (api, data, { connections }) => fillRefreshPool(api, data, Math.max(connections, 1)),
    requests(data) {
      // autocannon resets a connection's context each time it starts its request list again
      // (here: every request), so the context carries a refresh token from setupRequest to
      // onResponse only. Each request checks a live token out of the shared pool and puts the
      // rotated one back: no two requests in flight ever share a family, and every token is
      // presented exactly once (a second use would be reuse and revoke the session).
      const inFlight = new Set();
      data.refreshInFlight = inFlight;
      return [
        {
          method: 'POST',
          path: '/auth/v0/refresh',
          setupRequest(req, context) {
            const token = data.refreshPool.shift();
            context.token = token;
            if (token === undefined) return { ...req, headers: { ...req.headers } };
            inFlight.add(token);
            return { ...req, headers: { ...req.headers, cookie: `refresh_token=${token}` } };
          },
          onResponse(status, _body, context, headers) {
            if (context.token !== undefined) inFlight.delete(context.token);
            const next = status === 200 ? refreshTokenOf(headers['set-cookie'] ?? headers['Set-Cookie']) : undefined;
            if (next !== undefined) data.refreshPool.push(next);
          },
        },
      ];
    },
    // Tokens whose answer never came back (the run stopped) may have been rotated: drop them.
    after: (data) => data.refreshInFlight?.clear(),
  },
  {
    name: 'sign-in',
    label: 'POST /auth/v0/sign-in',
    reference: 'floor',
    pgliteReference: 'verify',
    requests(data) {
      let i = 0;
      return [
        {
          method: 'POST',
          path: '/auth/v0/sign-in',
          headers: JSON_HEADERS,
          setupRequest: (req) => ({ ...req, body: JSON.stringify({ username: data.signInUsers[i++ % data.signInUsers.length], password: PASSWORD }) }),
        },
      ];
    },
  },
  {
    name: 'sign-up',
    label: 'POST /auth/v0/sign-up',
    reference: 'floor',
    pgliteReference: 'hash',
    requests(data) {
      return [
        {
          method: 'POST',
          path: '/auth/v0/sign-up',
          headers: JSON_HEADERS,
          setupRequest(req) {
            const n = ++data.signUpSeq;
            return { ...req, body: JSON.stringify({ username: `su_${n}`, phone: phoneOf(7, n), password: PASSWORD }) };
          },
        },
      ];
    },
  },
  {
    // A password-reset request for an address nobody has (each request a new one, so the one per
    // address per 60 s never refuses): the answer is the rate limits only; the lookup runs after it.
    name: 'reset',
    label: 'POST /auth/v0/password-reset',
    reference: 'pk',
    requests(data) {
      return [
        {
          method: 'POST',
          path: '/auth/v0/password-reset',
          headers: JSON_HEADERS,
          setupRequest: (req) => ({ ...req, body: JSON.stringify({ email: `reset_${++data.resetSeq}_${process.pid}@bench.example` }) }),
        },
      ];
    },
  },
  {
    // A sign-in with a second factor, as a client makes it: the password step (403
    // auth.mfa_required and the challenge cookie), then the second step with a recovery code (a
    // TOTP code works once per user and 30 s). Only the second step's 200s count as answers:
    // req/s is two-step sign-ins per second, the latencies are the second step's.
    name: 'mfa',
    label: 'POST /auth/v0/sign-in + /auth/v0/sign-in/mfa',
    reference: 'verify',
    prepare: (api, data) => refillMfaPool(api, data),
    requests(data) {
      return [
        {
          method: 'POST',
          path: '/auth/v0/sign-in',
          headers: JSON_HEADERS,
          setupRequest(req, context) {
            context.entry = data.mfaPool.shift();
            return { ...req, body: JSON.stringify({ username: context.entry?.username ?? 'nobody', password: PASSWORD }) };
          },
          onResponse(_status, _body, context, headers) {
            context.challenge = cookieOf(headers['set-cookie'] ?? headers['Set-Cookie'], 'mfa_challenge') ?? '';
          },
        },
        {
          method: 'POST',
          path: '/auth/v0/sign-in/mfa',
          headers: JSON_HEADERS,
          setupRequest: (req, context) => ({
            ...req,
            headers: { ...req.headers, cookie: `mfa_challenge=${context.challenge ?? ''}` },
            body: JSON.stringify({ recovery_code: context.entry?.code ?? 'none' }),
          }),
        },
      ];
    },
  },
  {
    // A passkey sign-in, as a browser makes it: the options (the challenge, and its cookie), then
    // the assertion of a software passkey (bench/passkey.mjs, computed here in the load
    // generator) with that cookie. Both requests answer 200, so req/s counts each: passkey
    // sign-ins per second are half of it.
    name: 'passkey',
    label: 'POST /auth/v0/sign-in/passkey/options + /auth/v0/sign-in/passkey',
    reference: 'pk',
    requests(data) {
      let i = 0;
      return [
        {
          method: 'POST',
          path: '/auth/v0/sign-in/passkey/options',
          onResponse(_status, body, context, headers) {
            context.cookie = cookieOf(headers['set-cookie'] ?? headers['Set-Cookie'], 'webauthn_challenge') ?? '';
            try {
              context.challenge = JSON.parse(body).challenge;
            } catch {
              context.challenge = undefined;
            }
          },
        },
        {
          method: 'POST',
          path: '/auth/v0/sign-in/passkey',
          headers: JSON_HEADERS,
          setupRequest(req, context) {
            const credential = data.passkeys[i++ % data.passkeys.length];
            const response = assertion(credential, context.challenge ?? 'none');
            return { ...req, headers: { ...req.headers, cookie: `webauthn_challenge=${context.cookie ?? ''}` }, body: JSON.stringify({ response }) };
          },
        },
      ];
    },
  },
  {
    // The admin API's user read (docs/admin-api.md#get-a-user): the key check, the per-key
    // count, the AdminUser read; the floor checks the key and reads the user in one statement.
    name: 'admin-read',
    label: 'GET /admin/v0/users/{id} (admin API)',
    listener: 'admin',
    reference: 'floor',
    postgresOnly: true,
    requests(data) {
      let i = 0;
      const headers = { authorization: `Bearer ${data.admin.key}` };
      return [{ method: 'GET', path: '/admin/v0/users/x', setupRequest: (req) => ({ ...req, headers: { ...req.headers, ...headers }, path: `/admin/v0/users/${data.admin.userIds[i++ % data.admin.userIds.length]}` }) }];
    },
  },
  {
    // The admin API's search (docs/admin-api.md#list-users): a username prefix that matches about
    // 111 users, a page of 20; the floor checks the key and reads the page under the same index.
    name: 'admin-search',
    label: 'GET /admin/v0/users?query=<prefix>&limit=20 (admin API)',
    listener: 'admin',
    reference: 'floor',
    postgresOnly: true,
    requests(data) {
      let i = 0;
      const prefixes = adminSearchPrefixes(64);
      const headers = { authorization: `Bearer ${data.admin.key}` };
      return [{ method: 'GET', path: '/admin/v0/users', setupRequest: (req) => ({ ...req, headers: { ...req.headers, ...headers }, path: `/admin/v0/users?query=${prefixes[i++ % prefixes.length]}&limit=20` }) }];
    },
  },
  {
    // Sign-in with an identity provider, the first leg (docs/api.md#authorize): the per-IP
    // count, the flow row, 302 to the provider with the oauth_flow cookie. The floor makes the
    // same secrets and inserts the same row. The 302 is the answer (`okStatuses`).
    name: 'oauth-authorize',
    label: `GET /auth/v0/oauth/${OAUTH_PROVIDER}/authorize`,
    reference: 'floor',
    okStatuses: [302],
    postgresOnly: true,
    serviceSettings: (data) => data.oauthSettings,
    requests: () => [{ method: 'GET', path: `/auth/v0/oauth/${OAUTH_PROVIDER}/authorize` }],
  },
  {
    // The provider's return (docs/api.md#callback), whole: the flow consumed, the code exchanged
    // with its PKCE verifier at the provider (bench/github-server.mjs), GET /user and
    // /user/emails, the identity's user (made on the first sign-in of each account, in the
    // warm-up), a session; 303 to the app with the refresh cookie. Each callback needs a fresh
    // flow and code: `prepare` makes them (authorize, then the provider's authorization
    // endpoint) before each slice, untimed. A 303 without a refresh cookie (an error=<code>
    // return) counts in `data.oauth.failed`, logged after the slice.
    name: 'oauth-callback',
    label: `GET /auth/v0/oauth/${OAUTH_PROVIDER}/callback (code, state, oauth_flow)`,
    reference: 'pk',
    okStatuses: [303],
    postgresOnly: true,
    serviceSettings: (data) => data.oauthSettings,
    prepare: fillOAuthPool,
    requests(data) {
      const o = data.oauth;
      return [
        {
          method: 'GET',
          path: `/auth/v0/oauth/${OAUTH_PROVIDER}/callback`,
          setupRequest(req) {
            const flow = o.pool.shift();
            if (flow === undefined) {
              o.sliceRanDry++;
              return { ...req };
            }
            o.sliceUsed++;
            return { ...req, path: flow.path, headers: { ...req.headers, cookie: flow.cookie } };
          },
          onResponse(status, _body, _context, headers) {
            if (status === 303 && refreshTokenOf(headers['set-cookie'] ?? headers['Set-Cookie']) === undefined) o.failed++;
          },
        },
      ];
    },
    after(data) {
      const o = data.oauth;
      const seconds = (performance.now() - o.sliceStarted) / 1000;
      // The next pool follows this slice's rate; twice as much when the pool ran dry.
      if (seconds > 0 && o.sliceUsed > 0) o.rate = (o.sliceUsed / seconds) * (o.sliceRanDry > 0 ? 2 : 1);
      if (o.sliceRanDry > 0) log(`oauth-callback: the pool of flows ran dry (${o.sliceRanDry} requests without one); the next slice prepares more`);
      if (o.failed > 0) log(`oauth-callback: ${o.failed} callbacks so far answered 303 without a session (error=<code>); see the service log`);
    },
  },
  {
    name: 'jwks',
    label: 'GET /auth/v0/.well-known/jwks.json',
    reference: 'empty',
    requests: () => [{ method: 'GET', path: '/auth/v0/.well-known/jwks.json' }],
  },
  {
    name: 'sessions',
    label: 'GET /auth/v0/sessions (10 sessions)',
    reference: 'pk',
    prepare: (api, data) => freshenTokens(api, data.listerSessions),
    requests(data) {
      let i = 0;
      return [{ method: 'GET', path: '/auth/v0/sessions', setupRequest: (req) => ({ ...req, headers: { ...req.headers, authorization: `Bearer ${data.listerSessions[i++ % data.listerSessions.length].accessToken}` } }) }];
    },
  },
];

/** Requests for the reference servers: `{}` at `/`, and the primary-key route at `/<n>` (n spreads over the ids). */
export function referenceRequests(kind) {
  if (kind === 'empty') return [{ method: 'GET', path: '/' }];
  let n = 0;
  return [{ method: 'GET', path: '/0', setupRequest: (req) => ({ ...req, path: `/${n++}` }) }];
}

/**
 * One autocannon run against `url` (127.0.0.1 only): `connections` keep-alive connections, no
 * pipelining, for `seconds`. Latency percentiles are computed here from autocannon's per-response
 * times (high-resolution, successful answers only); autocannon's own histogram has 1 ms steps.
 */
export async function measure({ url, requests, connections, seconds, okStatuses }) {
  if (!url.startsWith('http://127.0.0.1:')) throw new Error(`refusing to load ${url}: only 127.0.0.1`);
  const latencies = [];
  const isOk = okStatuses === undefined ? (statusCode) => statusCode >= 200 && statusCode < 300 : (statusCode) => okStatuses.includes(statusCode);
  const instance = autocannon({ url, connections, pipelining: 1, duration: seconds, timeout: 10, requests });
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    if (isOk(statusCode)) latencies.push(responseTime);
  });
  const result = await instance;
  latencies.sort((a, b) => a - b);
  // With `okStatuses` (a scenario whose answer is a redirect), the answers with one of them.
  const ok = okStatuses === undefined ? result['2xx'] : latencies.length;
  return {
    connections,
    seconds: result.duration,
    reqPerSec: ok / result.duration,
    autocannonReqPerSecAvg: result.requests.average,
    requests: result.requests.total,
    ok,
    p50Ms: percentile(latencies, 50),
    p90Ms: percentile(latencies, 90),
    p99Ms: percentile(latencies, 99),
    maxMs: latencies.at(-1) ?? null,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: okStatuses === undefined ? result.non2xx : result['2xx'] + result.non2xx - ok,
    statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, v]) => [code, v.count])),
    /** Every successful answer's latency in ms, sorted: for {@link combineSlices}; not written to docs/. */
    latencies,
  };
}
