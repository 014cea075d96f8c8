// `npm run bench`: measures the built service on this machine against reference
// servers: the floor of each route (bench/floor-server.mjs) and the ceilings, and writes docs/performance.json (raw) and the results
// section of docs/performance.md (medians and spread). Not a test: it asserts nothing and is
// not part of `npm test` or .ci/run. See docs/performance.md for what it does and why.
//
// Settings (environment):
//   BENCH_REPEATS (3)            full passes over every scenario; the docs give medians and spread
//   BENCH_DURATION (10)          seconds measured per side (service, reference) of each scenario, in
//                                BENCH_ROUNDS (5) alternating slices, after BENCH_WARMUP (3) s of warm-up
//   BENCH_CONNECTIONS (32,1)     concurrencies measured
//   BENCH_SCENARIOS (all)        comma-separated subset of me,me-uncached,refresh,sign-in,sign-up,reset,mfa,passkey,
//                                admin-read,admin-search,oauth-authorize,oauth-callback,jwks,sessions
//   BENCH_BALLAST_SESSIONS (100000)  users with one session each, inserted before measuring
//   BENCH_START_RUNS (5)         start-to-ready runs per pass
//   BENCH_PGLITE (1)             0 skips the embedded-database pass (BENCH_PGLITE_DURATION, 5 s)
//   BENCH_MAX_LOAD (1.0), BENCH_QUIET_TIMEOUT (600), BENCH_QUIET_POLL (30)
//                                before each pass, wait (polling) until the 1-minute load is below
//                                BENCH_MAX_LOAD, for at most BENCH_QUIET_TIMEOUT seconds
//   BENCH_WRITE (1)              0 prints the results without writing docs/
//   BENCH_SERVICE_NODE_OPTIONS   NODE_OPTIONS for the service only (say --max-semi-space-size=4),
//                                to measure a tuning; unset in the documented runs
// UV_THREADPOOL_SIZE and DATABASE_POOL_MAX, when set, are passed to the service (and to the
// matching reference) unchanged.
import { execSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hash } from '@node-rs/argon2';
import { loadConfig } from '../dist/src/config.js';
import { argon2Concurrency } from '../dist/src/crypto/password.js';
import {
  apiClient,
  childProcesses,
  argon2Ceiling,
  combineSlices,
  cpuDelta,
  cpuSnapshot,
  createDatabase,
  dropDatabase,
  ensurePostgres,
  envNumber,
  insertBallast,
  loadAverage,
  log,
  measure,
  median,
  memoryOf,
  PASSWORD,
  postgresVersion,
  prepareAdmin,
  prepareUsers,
  referenceRequests,
  ROOT,
  SCENARIOS,
  serviceEnv,
  serviceNodeFlags,
  startFloor,
  startGithub,
  startReference,
  startService,
  waitForQuiet,
  withClient,
  writeSigningKey,
} from './lib.mjs';
import { renderResults, writeDocs } from './report.mjs';

/** libuv's thread pool size when UV_THREADPOOL_SIZE is unset. */
const LIBUV_DEFAULT_THREADPOOL_SIZE = 4;
/** Warm-up of each argon2id-ceiling slice (a process of its own, started per slice). */
const ARGON2_SLICE_WARMUP_SECONDS = 0.5;
/** Rounds of the embedded-database pass (shorter: its slices would otherwise last one second). */
const PGLITE_ROUNDS = 2;
/** Rows of the reference table whose ids the primary-key reference requests cycle through. */
const REFERENCE_IDS = 10_000;

const settings = {
  repeats: Math.max(1, Math.floor(envNumber('BENCH_REPEATS', 3))),
  seconds: envNumber('BENCH_DURATION', 10),
  rounds: Math.max(1, Math.floor(envNumber('BENCH_ROUNDS', 5))),
  warmupSeconds: envNumber('BENCH_WARMUP', 3),
  connections: (process.env.BENCH_CONNECTIONS ?? '32,1').split(',').map((c) => Math.max(1, Math.floor(Number(c)))),
  scenarios: (process.env.BENCH_SCENARIOS ?? SCENARIOS.map((s) => s.name).join(',')).split(',').map((s) => s.trim()),
  ballastSessions: Math.floor(envNumber('BENCH_BALLAST_SESSIONS', 100_000)),
  startRuns: Math.max(1, Math.floor(envNumber('BENCH_START_RUNS', 5))),
  pglite: process.env.BENCH_PGLITE !== '0',
  pgliteSeconds: envNumber('BENCH_PGLITE_DURATION', 5),
  pgliteWarmupSeconds: Math.min(2, envNumber('BENCH_WARMUP', 3)),
  maxLoad: envNumber('BENCH_MAX_LOAD', 1.0),
  quietTimeoutSeconds: envNumber('BENCH_QUIET_TIMEOUT', 600),
  quietPollSeconds: Math.max(1, envNumber('BENCH_QUIET_POLL', 30)),
  write: process.env.BENCH_WRITE !== '0',
};
const serviceNodeOptions = process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {};
const scenarios = SCENARIOS.filter((s) => settings.scenarios.includes(s.name));
if (scenarios.length === 0) throw new Error(`BENCH_SCENARIOS: none of ${settings.scenarios.join(', ')} is a scenario`);

const tmp = mkdtempSync(path.join(os.tmpdir(), 'auth-bench-'));
const logDir = path.join(tmp, 'logs');
mkdirSync(logDir);
const dbName = `auth_bench_${Date.now()}`;
/** Child processes still running, stopped on the way out whatever happens. */
const { track, stopAll } = childProcesses();
let cleanedUp = false;
async function cleanup() {
  if (cleanedUp) return;
  cleanedUp = true;
  await stopAll();
  await dropDatabase(dbName).catch((err) => log(`could not drop ${dbName}: ${err.message}`));
  rmSync(tmp, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    log(`${signal}: stopping children and dropping ${dbName}`);
    cleanup().finally(() => process.exit(130));
  });
}

/** Spawns the service `runs` times, one at a time, and returns each spawn-to-first-answer time. */
async function startToReady(env, runs, label) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const service = track(await startService({ env, logFile: path.join(logDir, `${label}-start-${i}.log`) }));
    times.push(service.readyMs);
    await service.stop();
  }
  return times;
}

/**
 * Measures one scenario at one concurrency on `service` and on its reference: after a warm-up
 * of each, `rounds` rounds of one slice of `seconds / rounds` on each side, the side that goes
 * first alternating from round to round (and `serviceFirst` from pass to pass), so that a
 * machine whose speed drifts (other virtual machines on the same host) weighs on both sides
 * alike. Each side's slices are combined: rates over the summed time, percentiles over every
 * answer, CPU per request over the summed CPU.
 */
async function measurePair({ scenario, connections, service, api, data, refs, argon2Parallel, env, serviceFirst, seconds, warmupSeconds, rounds }) {
  const sliceSeconds = seconds / rounds;
  const serviceSlice = async (s) => {
    await scenario.prepare?.(api, data, { connections, seconds: s });
    const before = cpuSnapshot(service.pid);
    const m = await measure({ url: scenario.listener === 'admin' ? service.adminUrl : service.url, requests: scenario.requests(data), connections, seconds: s, okStatuses: scenario.okStatuses });
    const cpu = cpuDelta(before, cpuSnapshot(service.pid));
    scenario.after?.(data);
    return { ...m, cpu };
  };
  // The floors run on PostgreSQL only: the embedded pass (no `floor` in refs) uses the scenario's pgliteReference.
  const reference = refs[scenario.reference] === undefined ? (scenario.pgliteReference ?? scenario.reference) : scenario.reference;
  const argon2 = reference === 'hash' || reference === 'verify';
  const floor = reference === 'floor';
  const parallel = Math.min(connections, argon2Parallel);
  const referenceSlice = async (s) => {
    if (argon2) {
      const c = argon2Ceiling({ op: reference, parallel, seconds: s, warmupSeconds: ARGON2_SLICE_WARMUP_SECONDS, env });
      return { connections, seconds: c.seconds, ok: c.count, requests: c.count, latencies: c.latencies };
    }
    const ref = refs[reference];
    // A floor answers the scenario's own requests (the same users, the same pool of refresh tokens).
    if (floor) await scenario.prepare?.(api, data, { connections, seconds: s });
    const before = cpuSnapshot(ref.pid);
    const m = await measure({ url: ref.url, requests: floor ? scenario.requests(data) : referenceRequests(reference), connections, seconds: s, okStatuses: floor ? scenario.okStatuses : undefined });
    const cpu = cpuDelta(before, cpuSnapshot(ref.pid));
    if (floor) scenario.after?.(data);
    return { ...m, cpu };
  };
  const load1 = loadAverage().one;
  // Warm-up: each side once, not recorded (the argon2id ceiling warms up in every slice).
  await serviceSlice(warmupSeconds);
  if (!argon2) await referenceSlice(warmupSeconds);
  const serviceSlices = [];
  const referenceSlices = [];
  for (let round = 0; round < rounds; round++) {
    if ((round % 2 === 0) === serviceFirst) {
      serviceSlices.push(await serviceSlice(sliceSeconds));
      referenceSlices.push(await referenceSlice(sliceSeconds));
    } else {
      referenceSlices.push(await referenceSlice(sliceSeconds));
      serviceSlices.push(await serviceSlice(sliceSeconds));
    }
  }
  const serviceResult = combineSlices(serviceSlices);
  const kind = argon2
    ? `argon2id ${reference === 'hash' ? 'hashes' : 'verifications'}/s, ${parallel} in parallel`
    : floor
      ? `floor (bench/floor-server.mjs)`
      : reference === 'empty'
        ? 'bare Fastify {}'
        : 'bare Fastify primary-key SELECT';
  const referenceResult = { kind, ...combineSlices(referenceSlices), ...(argon2 ? { parallel } : {}) };
  const memory = memoryOf(service.pid);
  const ratio = referenceResult.reqPerSec > 0 ? serviceResult.reqPerSec / referenceResult.reqPerSec : null;
  log(
    `${scenario.name.padEnd(8)} c=${String(connections).padEnd(2)} service ${serviceResult.reqPerSec.toFixed(0)} req/s p50 ${serviceResult.p50Ms?.toFixed(2)} p99 ${serviceResult.p99Ms?.toFixed(2)} ms non2xx ${serviceResult.non2xx} errors ${serviceResult.errors}` +
      ` | reference ${referenceResult.reqPerSec.toFixed(1)} | ratio ${ratio?.toFixed(3)} | peak RSS ${memory.peakRssMiB?.toFixed(0)} MiB`,
  );
  return { scenario: scenario.name, label: scenario.label, connections, load1Before: load1, service: serviceResult, reference: referenceResult, ratio, serviceMemoryAfter: memory };
}

/** One pass over every scenario and concurrency against a freshly started service. */
async function pass({ env, data, refs, argon2Parallel, seconds, warmupSeconds, rounds, serviceFirst, label }) {
  const service = track(await startService({ env, logFile: path.join(logDir, `${label}-service.log`) }));
  const api = apiClient(service.url);
  const results = [];
  for (const scenario of scenarios) {
    const settingsOwn = typeof scenario.serviceSettings === 'function' ? scenario.serviceSettings(data) : scenario.serviceSettings;
    if ((settingsOwn !== undefined || scenario.postgresOnly === true) && env.DATABASE_URL === undefined) continue;
    // A scenario with settings of its own runs on a service of its own, stopped after it.
    const own = settingsOwn === undefined ? undefined : track(await startService({ env: { ...env, ...settingsOwn }, logFile: path.join(logDir, `${label}-${scenario.name}-service.log`) }));
    const target = own ?? service;
    for (const connections of settings.connections) {
      results.push(await measurePair({ scenario, connections, service: target, api: own === undefined ? api : apiClient(own.url), data, refs, argon2Parallel, env, serviceFirst, seconds, warmupSeconds, rounds }));
    }
    await own?.stop();
  }
  const memory = memoryOf(service.pid);
  await service.stop();
  return { results, servicePeakRssMiB: memory.peakRssMiB };
}

function gitRevision() {
  try {
    const commit = execSync('git rev-parse --short HEAD', { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execSync('git status --porcelain', { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
    return `${commit}${dirty ? ' (with uncommitted changes)' : ''}`;
  } catch {
    return null;
  }
}

async function main() {
  await ensurePostgres();
  const startedAt = new Date();
  const dbUrl = await createDatabase(dbName);
  log(`database ${dbName}, temporary files in ${tmp}`);
  const keyFile = writeSigningKey(tmp);
  const env = serviceEnv({ DATABASE_URL: dbUrl, JWT_PRIVATE_KEY_FILE: keyFile, DATA_DIR: path.join(tmp, 'data'), ...serviceNodeOptions });
  const config = loadConfig(env);
  // argon2id runs on libuv's thread pool, at most argon2Concurrency() (one per core) at a time:
  // the concurrency the service effectively has, and so the one the ceiling is measured at.
  const threadPoolSize = Number(env.UV_THREADPOOL_SIZE ?? LIBUV_DEFAULT_THREADPOOL_SIZE);
  const argon2Parallel = Math.min(argon2Concurrency(), threadPoolSize);
  const argon2Options = { algorithm: 2, memoryCost: config.argon2.memoryCost, timeCost: config.argon2.timeCost, parallelism: config.argon2.parallelism };

  // Migrations applied by the first start; then the tables are filled (not timed).
  const first = track(await startService({ env, logFile: path.join(logDir, 'first-start.log') }));
  const firstStartMs = first.readyMs;
  log(`first start (migrations applied) ${firstStartMs.toFixed(0)} ms; inserting ${settings.ballastSessions} users with a session each`);
  const ballastHash = await hash(PASSWORD, argon2Options);
  await withClient(dbUrl, (c) => insertBallast((sql, params) => c.query(sql, params), settings.ballastSessions, ballastHash));
  const data = await prepareUsers(apiClient(first.url));
  data.admin = await withClient(dbUrl, (c) => prepareAdmin((sql, params) => c.query(sql, params)));
  await first.stop();

  // The primary-key reference reads a copy of the sessions table (same rows, same indexes).
  const idsFile = path.join(tmp, 'reference-ids.txt');
  const sessionRows = await withClient(dbUrl, async (c) => {
    await c.query('CREATE TABLE bench_pk_reference (LIKE sessions INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)');
    await c.query('INSERT INTO bench_pk_reference SELECT * FROM sessions');
    await c.query('ANALYZE bench_pk_reference');
    const ids = await c.query(`SELECT id FROM bench_pk_reference ORDER BY random() LIMIT ${REFERENCE_IDS}`);
    writeFileSync(idsFile, ids.rows.map((r) => r.id).join('\n'));
    return Number((await c.query('SELECT count(*) AS n FROM sessions')).rows[0].n);
  });
  // The identity provider of the `oauth-*` scenarios, when one of them runs (PostgreSQL only).
  const github = scenarios.some((s) => s.name.startsWith('oauth-')) ? track(await startGithub({ logFile: path.join(logDir, 'github.log') })) : undefined;
  data.oauthSettings = github?.serviceSettings;
  const refEnv = { ...process.env, DATABASE_URL: dbUrl, DATABASE_POOL_MAX: String(config.databasePoolMax) };
  const refs = {
    empty: track(await startReference({ args: ['empty'], env: refEnv, logFile: path.join(logDir, 'reference-empty.log') })),
    pk: track(await startReference({ args: ['pk', 'bench_pk_reference', idsFile], env: refEnv, logFile: path.join(logDir, 'reference-pk.log') })),
    floor: track(await startFloor({ env: { ...env, ...github?.serviceSettings }, logFile: path.join(logDir, 'floor.log') })),
  };

  const passes = [];
  for (let r = 1; r <= settings.repeats; r++) {
    const quiet = await waitForQuiet({ maxLoad: settings.maxLoad, timeoutSeconds: settings.quietTimeoutSeconds, pollSeconds: settings.quietPollSeconds });
    log(`pass ${r}/${settings.repeats} (1-min load ${quiet.after.one})`);
    const startTimes = await startToReady(env, settings.startRuns, `pass${r}`);
    log(`start to ready: ${startTimes.map((t) => t.toFixed(0)).join(', ')} ms`);
    const result = await pass({ env, data, refs, argon2Parallel, seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, rounds: settings.rounds, serviceFirst: r % 2 === 1, label: `pass${r}` });
    passes.push({ pass: r, quiet, startToReadyMs: startTimes, startToReadyMedianMs: median(startTimes), servicePeakRssMiB: result.servicePeakRssMiB, loadAfter: loadAverage(), results: result.results });
  }
  await Promise.all([refs.empty.stop(), refs.pk.stop(), refs.floor.stop(), github?.stop()]);

  const pglite = settings.pglite ? await pglitePass({ keyFile, argon2Parallel, sessionRows }) : null;

  const report = {
    generatedAt: new Date().toISOString(),
    startedAt: startedAt.toISOString(),
    revision: gitRevision(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? null,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      postgres: await postgresVersion(),
    },
    settings: {
      ...settings,
      scenarios: scenarios.map((s) => s.name),
      service: {
        databasePoolMax: config.databasePoolMax,
        accessTokenCacheSize: config.jwt.accessTokenCacheSize,
        uvThreadpoolSize: threadPoolSize,
        uvThreadpoolSizeFromEnv: env.UV_THREADPOOL_SIZE ?? null,
        argon2Concurrency: argon2Parallel,
        argon2: config.argon2,
        logLevel: env.LOG_LEVEL,
        nodeFlags: serviceNodeFlags(),
        nodeOptions: serviceNodeOptions.NODE_OPTIONS ?? null,
        rateLimits: 'defaults, but RATE_LIMIT_SIGN_IN_PER_IP and RATE_LIMIT_SIGN_UP_PER_IP=1000000',
        sessionRowsAtStart: sessionRows,
      },
    },
    firstStartWithMigrationsMs: firstStartMs,
    passes,
    pglite,
  };
  const json = `${JSON.stringify(report, null, 2)}\n`;
  if (settings.write) {
    writeFileSync(path.join(ROOT, 'docs/performance.json'), json);
    writeDocs(path.join(ROOT, 'docs/performance.md'), renderResults(report));
    log('wrote docs/performance.json and the results section of docs/performance.md');
  } else {
    process.stdout.write(renderResults(report));
  }
}

/** The embedded database: one shorter pass, compared with a primary-key route on PGlite. */
async function pglitePass({ keyFile, argon2Parallel, sessionRows }) {
  const dataDir = path.join(tmp, 'pglite-data');
  const env = serviceEnv({ JWT_PRIVATE_KEY_FILE: keyFile, DATA_DIR: dataDir, ...serviceNodeOptions });
  const config = loadConfig(env);
  const quiet = await waitForQuiet({ maxLoad: settings.maxLoad, timeoutSeconds: settings.quietTimeoutSeconds, pollSeconds: settings.quietPollSeconds });
  log(`PGlite pass (1-min load ${quiet.after.one})`);
  const first = track(await startService({ env, logFile: path.join(logDir, 'pglite-first-start.log') }));
  const firstStartMs = first.readyMs;
  await first.stop();
  // PGlite admits one process: the ballast goes in while the service is stopped.
  const { PGlite } = await import('@electric-sql/pglite');
  const db = new PGlite(path.join(dataDir, 'pglite'));
  await db.waitReady;
  const argon2Options = { algorithm: 2, memoryCost: config.argon2.memoryCost, timeCost: config.argon2.timeCost, parallelism: config.argon2.parallelism };
  await insertBallast((sql, params) => db.query(sql, params), settings.ballastSessions, await hash(PASSWORD, argon2Options));
  await db.close();
  const startTimes = await startToReady(env, Math.min(3, settings.startRuns), 'pglite');
  const refs = {
    empty: track(await startReference({ args: ['empty'], env: process.env, logFile: path.join(logDir, 'pglite-reference-empty.log') })),
    pk: track(await startReference({ args: ['pglite-pk', path.join(tmp, 'pglite-reference'), String(sessionRows)], env: process.env, logFile: path.join(logDir, 'pglite-reference-pk.log') })),
  };
  const service = track(await startService({ env, logFile: path.join(logDir, 'pglite-prepare.log') }));
  const data = await prepareUsers(apiClient(service.url));
  await service.stop();
  const result = await pass({ env, data, refs, argon2Parallel, seconds: settings.pgliteSeconds, warmupSeconds: settings.pgliteWarmupSeconds, rounds: Math.min(PGLITE_ROUNDS, settings.rounds), serviceFirst: true, label: 'pglite' });
  await Promise.all([refs.empty.stop(), refs.pk.stop()]);
  return { quiet, firstStartWithMigrationsMs: firstStartMs, startToReadyMs: startTimes, startToReadyMedianMs: median(startTimes), servicePeakRssMiB: result.servicePeakRssMiB, results: result.results };
}

try {
  await main();
} finally {
  await cleanup();
}
