// ad-hoc experiment (not committed): CPU per request by thread / process during one scenario
import { readFileSync, readdirSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execSync } from 'node:child_process';
import { hash } from '@node-rs/argon2';
import { loadConfig } from '../dist/src/config.js';
import { apiClient, createDatabase, dropDatabase, insertBallast, measure, PASSWORD, prepareUsers, SCENARIOS, serviceEnv, startService, withClient, writeSigningKey } from './lib.mjs';
const TICK = 100; // clock ticks per second
const tmp = mkdtempSync(path.join(os.tmpdir(), 'exp-'));
const dbName = `auth_exp_${Date.now()}`;
const dbUrl = await createDatabase(dbName);
if (process.env.EXP_SYNC_OFF) await withClient(dbUrl, (c) => c.query(`ALTER DATABASE ${dbName} SET synchronous_commit = off`));
const keyFile = writeSigningKey(tmp);
const extra = JSON.parse(process.env.EXP_ENV ?? '{}');
const env = serviceEnv({ DATABASE_URL: dbUrl, JWT_PRIVATE_KEY_FILE: keyFile, DATA_DIR: path.join(tmp, 'data'), ...extra });
const config = loadConfig(env);
let svc = await startService({ env, nodeArgs: process.env.EXP_NODE_ARGS ? process.env.EXP_NODE_ARGS.split(' ') : [], logFile: path.join(tmp, 'svc.log') });
await withClient(dbUrl, (c) => insertBallast((s, p) => c.query(s, p), 100000, 'x'));
const data = await prepareUsers(apiClient(svc.url));
if (process.env.EXP_RESTART) { await svc.stop(); svc = await startService({ env, nodeArgs: process.env.EXP_NODE_ARGS ? process.env.EXP_NODE_ARGS.split(' ') : [], logFile: path.join(tmp, 'svc2.log') }); { const st = readFileSync(`/proc/${svc.pid}/status`, 'utf8'); console.log('fresh start', /VmHWM:\s+(\d+)/.exec(st)[1], /VmRSS:\s+(\d+)/.exec(st)[1]); } }
const threadCpu = (pid) => Object.fromEntries(readdirSync(`/proc/${pid}/task`).map((t) => { const f = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8').split(') ')[1].split(' '); const name = readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim(); return [`${t}:${name}`, (Number(f[11]) + Number(f[12])) / TICK]; }));
const mainUS = (pid) => { const f = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return [Number(f[11]) / TICK, Number(f[12]) / TICK]; };
const pgCpu = () => { let s = 0; for (const p of execSync('pgrep -u postgres').toString().trim().split('\n')) { try { const f = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' '); s += (Number(f[11]) + Number(f[12])) / TICK; } catch {} } return s; };
const self = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const sys = () => { const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1).map(Number); return { idle: (f[3] + f[4]) / TICK, total: f.reduce((a, b) => a + b, 0) / TICK }; };
for (const name of (process.env.EXP_SCEN ?? 'me').split(',')) {
  const scenario = SCENARIOS.find((s) => s.name === name);
  const conns = Number(process.env.EXP_CONNS ?? 32);
  const api = apiClient(svc.url);
  await scenario.prepare?.(api, data, { connections: conns });
  await measure({ url: svc.url, requests: scenario.requests(data), connections: conns, seconds: 3 });
  scenario.after?.(data);
  await scenario.prepare?.(api, data, { connections: conns });
  const u0 = mainUS(svc.pid), t0 = threadCpu(svc.pid), p0 = pgCpu(), s0 = self(), y0 = sys();
  const perf = process.env.EXP_PERF ? (await import('node:child_process')).spawn('perf', ['record', '-e', 'cpu-clock', '-F', '2000', '-g', '-t', String(svc.pid), '-o', `/tmp/exp/perf-${name}.data`], { stdio: 'ignore' }) : null;
  const m = await measure({ url: svc.url, requests: scenario.requests(data), connections: conns, seconds: Number(process.env.EXP_SECONDS ?? 8) });
  if (perf) { perf.kill('SIGINT'); await new Promise((r) => perf.once('exit', r)); }
  const u1 = mainUS(svc.pid), t1 = threadCpu(svc.pid), p1 = pgCpu(), s1 = self(), y1 = sys();
  scenario.after?.(data);
  const st = readFileSync(`/proc/${svc.pid}/status`, 'utf8'); const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(st)[1]) / 1024;
  const met = await (await fetch(`${svc.url}/metrics`)).text(); const g = (re) => (Number(re.exec(met)?.[1]) / 2 ** 20).toFixed(0);
  console.log(`  mem after ${name}: HWM ${kb('VmHWM').toFixed(0)} RSS ${kb('VmRSS').toFixed(0)} MiB; heap total ${g(/^nodejs_heap_size_total_bytes (\S+)/m)} used ${g(/^nodejs_heap_size_used_bytes (\S+)/m)} external ${g(/^nodejs_external_memory_bytes (\S+)/m)} new space ${g(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\S+)/m)} old ${g(/^nodejs_heap_space_size_total_bytes\{space="old"\} (\S+)/m)} code ${g(/^nodejs_heap_space_size_total_bytes\{space="code"\} (\S+)/m)}`);
  const n = m.ok;
  const per = (x) => (x * 1e6 / n).toFixed(0);
  const threads = Object.keys(t1).map((k) => [k, (t1[k] - (t0[k] ?? 0))]).filter(([, v]) => v > 0.05).map(([k, v]) => `${k}=${per(v)}`).join(' ');
  console.log(`${name} c=${conns}: ${m.reqPerSec.toFixed(0)} req/s p50 ${m.p50Ms.toFixed(2)} p99 ${m.p99Ms.toFixed(2)} non2xx ${m.non2xx}; µs CPU/req: service threads ${threads}; postgres ${per(p1 - p0)}; loadgen ${per(s1 - s0)}; idle ${per(y1.idle - y0.idle)}; total ${per(y1.total - y0.total)}; main user ${per(u1[0]-u0[0])} sys ${per(u1[1]-u0[1])}`);
}
await svc.stop();
await dropDatabase(dbName);
