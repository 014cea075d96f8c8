// `npm run bench:profile`: where the service's main thread spends its time under load, per
// scenario. For each scenario the built service runs under `node --cpu-prof`, gets a warm-up and
// then BENCH_DURATION (10) seconds at BENCH_PROFILE_CONNECTIONS (32) connections, and is
// stopped; the samples taken during the measured window are summed by function (self time)
// and by package. Prints markdown; keeps the .cpuprofile files when BENCH_PROFILE_DIR is set
// (open them in Chrome DevTools or speedscope). Same machine check, database and data as
// `npm run bench`. BENCH_PROFILE_TARGET=floor profiles the floor references of
// bench/floor-server.mjs instead of the service, to compare the two function by function.
// Not a test, not part of .ci/run.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hash } from '@node-rs/argon2';
import { loadConfig } from '../dist/src/config.js';
import { summarise } from './cpu-profile.mjs';
import {
  apiClient,
  createDatabase,
  dropDatabase,
  ensurePostgres,
  envNumber,
  insertBallast,
  log,
  measure,
  PASSWORD,
  prepareUsers,
  SCENARIOS,
  serviceEnv,
  startFloor,
  startService,
  stopChild,
  waitForQuiet,
  withClient,
  writeSigningKey,
} from './lib.mjs';

const seconds = envNumber('BENCH_DURATION', 10);
const warmupSeconds = envNumber('BENCH_WARMUP', 3);
const connections = Math.max(1, Math.floor(envNumber('BENCH_PROFILE_CONNECTIONS', 32)));
const top = Math.floor(envNumber('BENCH_PROFILE_TOP', 15));

const target = process.env.BENCH_PROFILE_TARGET ?? 'service';
if (target !== 'service' && target !== 'floor') throw new Error(`BENCH_PROFILE_TARGET must be service or floor, not ${target}`);
/** The scenarios bench/floor-server.mjs serves (the others would profile its 404s). */
const FLOOR_SCENARIOS = ['me', 'me-uncached', 'refresh', 'sign-in', 'sign-up'];
/** Scenarios whose settings are known at run time only (the `oauth-*` ones need bench/run.mjs's identity provider): not profiled here. */
const RUN_ONLY = SCENARIOS.filter((s) => typeof s.serviceSettings === 'function').map((s) => s.name);
const defaults = target === 'floor' ? FLOOR_SCENARIOS : ['start', ...SCENARIOS.map((s) => s.name).filter((name) => !RUN_ONLY.includes(name))];
const wanted = (process.env.BENCH_SCENARIOS ?? defaults.join(',')).split(',').map((s) => s.trim());
if (wanted.some((name) => RUN_ONLY.includes(name))) throw new Error(`${RUN_ONLY.join(', ')}: measured by npm run bench only (they need its identity provider)`);
if (target === 'floor' && wanted.some((name) => !FLOOR_SCENARIOS.includes(name))) throw new Error(`the floor serves only ${FLOOR_SCENARIOS.join(', ')}`);
/** Starts what is profiled: the service, or its floor references. */
const startTarget = (options) => (target === 'floor' ? startFloor(options) : startService(options));
const scenarios = SCENARIOS.filter((s) => wanted.includes(s.name));
/** Samples this close to either end of the measured window are left out (clock alignment). */
const EDGE_MS = 500;

const tmp = mkdtempSync(path.join(os.tmpdir(), 'auth-profile-'));
const profileRoot = process.env.BENCH_PROFILE_DIR ? path.resolve(process.env.BENCH_PROFILE_DIR) : path.join(tmp, 'profiles');
const dbName = `auth_bench_${Date.now()}`;
let running;

async function main() {
  await ensurePostgres();
  const quiet = await waitForQuiet({ maxLoad: envNumber('BENCH_MAX_LOAD', 1.0), timeoutSeconds: envNumber('BENCH_QUIET_TIMEOUT', 600), pollSeconds: Math.max(1, envNumber('BENCH_QUIET_POLL', 30)) });
  const dbUrl = await createDatabase(dbName);
  const keyFile = writeSigningKey(tmp);
  const env = serviceEnv({ DATABASE_URL: dbUrl, JWT_PRIVATE_KEY_FILE: keyFile, DATA_DIR: path.join(tmp, 'data') });
  const config = loadConfig(env);
  const logFile = path.join(tmp, 'service.log');
  running = await startService({ env, logFile });
  const ballastHash = await hash(PASSWORD, { algorithm: 2, ...config.argon2 });
  await withClient(dbUrl, (c) => insertBallast((sql, params) => c.query(sql, params), Math.floor(envNumber('BENCH_BALLAST_SESSIONS', 100_000)), ballastHash));
  const data = await prepareUsers(apiClient(running.url));
  await running.stop();

  const out = [`${target === 'floor' ? 'Floor references (bench/floor-server.mjs): p' : 'P'}rofiles at ${connections} connections, ${seconds} s each (1-minute load before: ${quiet.after.one}); self time of the main thread.`, ''];
  const table = (title, rows) => [`| ${title} | ms | share |`, '|---|---|---|', ...rows.map((r) => `| ${r.name.replaceAll('|', '\\|')} | ${r.ms.toFixed(0)} | ${(r.share * 100).toFixed(1)}% |`), ''];
  if (wanted.includes('start')) {
    // Start to ready: the whole profile of a start on a current schema, up to the first answer.
    const dir = path.join(profileRoot, 'start');
    mkdirSync(dir, { recursive: true });
    running = await startService({ env, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`], logFile });
    const readyMs = running.readyMs;
    await stopChild(running.child);
    running = undefined;
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    const summary = summarise(JSON.parse(readFileSync(path.join(dir, file), 'utf8')), 0, readyMs);
    out.push(`### Start to ready: ${readyMs.toFixed(0)} ms under the profiler`, '', ...table('Self time by origin', summary.origins.slice(0, 15)), ...table('Function (self time)', summary.functions.slice(0, top)));
  }
  for (const scenario of scenarios) {
    const dir = path.join(profileRoot, scenario.name);
    mkdirSync(dir, { recursive: true });
    const spawnedAt = performance.now();
    running = await startTarget({ env: { ...env, ...scenario.serviceSettings }, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`], logFile });
    const api = apiClient(running.url);
    await scenario.prepare?.(api, data, { connections });
    await measure({ url: running.url, requests: scenario.requests(data), connections, seconds: warmupSeconds });
    scenario.after?.(data);
    await scenario.prepare?.(api, data, { connections });
    const from = performance.now() - spawnedAt;
    const m = await measure({ url: running.url, requests: scenario.requests(data), connections, seconds });
    const to = performance.now() - spawnedAt;
    scenario.after?.(data);
    await stopChild(running.child);
    running = undefined;
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (file === undefined) throw new Error(`no profile written in ${dir}`);
    const summary = summarise(JSON.parse(readFileSync(path.join(dir, file), 'utf8')), from + EDGE_MS, to - EDGE_MS);
    log(`${scenario.name}: ${m.reqPerSec.toFixed(0)} req/s under the profiler`);
    const busy = summary.origins.filter((o) => o.name !== '(idle)').reduce((a, o) => a + o.ms, 0);
    out.push(
      `### ${scenario.label}: ${m.reqPerSec.toFixed(0)} req/s under the profiler, main thread busy ${((busy / summary.totalMs) * 100).toFixed(0)}% of the window`,
      '',
      ...table('Self time by origin', summary.origins.slice(0, 12)),
      ...table('Function (self time)', summary.functions.slice(0, top)),
    );
  }
  process.stdout.write(`${out.join('\n')}\n`);
  if (process.env.BENCH_PROFILE_DIR) log(`profiles kept in ${profileRoot}`);
}

try {
  await main();
} finally {
  if (running !== undefined) await stopChild(running.child);
  await dropDatabase(dbName).catch((err) => log(`could not drop ${dbName}: ${err.message}`));
  rmSync(tmp, { recursive: true, force: true });
}
