// The argon2id ceiling of this machine (bench/run.mjs): how many hashes or verifications per
// second @node-rs/argon2 does with the service's parameters, with `parallel` calls in flight
// (the libuv thread pool size the service runs with, or 1 for the single-connection runs).
//
//   node bench/argon2-ceiling.mjs <hash|verify> <parallel> <seconds> [warm-up seconds]
//
// The parameters come from the service's own configuration code (dist/src/config.js, ARGON2_*
// from the environment, OWASP's minimum by default), so they are exactly what the service uses.
// Prints one JSON line: { op, parallel, seconds, count, perSecond, p50Ms, p99Ms, params, latencies }.
import { hash, verify } from '@node-rs/argon2';
import { loadConfig } from '../dist/src/config.js';

const [op, parallelArg, secondsArg, warmupArg] = process.argv.slice(2);
const parallel = Number(parallelArg);
const seconds = Number(secondsArg);
const warmupSeconds = Number(warmupArg ?? 1);
if ((op !== 'hash' && op !== 'verify') || !(parallel >= 1) || !(seconds > 0)) {
  throw new Error('usage: argon2-ceiling.mjs <hash|verify> <parallel> <seconds> [warm-up seconds]');
}
/** `Algorithm.Argon2id` of @node-rs/argon2 (a const enum in its typings). */
const ARGON2ID = 2;
const { argon2 } = loadConfig({ ARGON2_MEMORY_KIB: process.env.ARGON2_MEMORY_KIB, ARGON2_TIME_COST: process.env.ARGON2_TIME_COST, ARGON2_PARALLELISM: process.env.ARGON2_PARALLELISM });
const options = { algorithm: ARGON2ID, memoryCost: argon2.memoryCost, timeCost: argon2.timeCost, parallelism: argon2.parallelism };
const password = 'correct horse battery staple';
const stored = await hash(password, options);
const once = op === 'hash' ? () => hash(password, options) : () => verify(stored, password);

/** Runs `parallel` loops of back-to-back calls until `ms` have passed; returns per-call latencies. */
async function run(ms) {
  const deadline = performance.now() + ms;
  const latencies = [];
  const loop = async () => {
    while (performance.now() < deadline) {
      const start = performance.now();
      await once();
      latencies.push(performance.now() - start);
    }
  };
  await Promise.all(Array.from({ length: parallel }, loop));
  return latencies;
}

await run(warmupSeconds * 1000);
const started = performance.now();
const latencies = await run(seconds * 1000);
const elapsed = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
process.stdout.write(
  `${JSON.stringify({ op, parallel, seconds: elapsed, count: latencies.length, perSecond: latencies.length / elapsed, p50Ms: pct(50), p99Ms: pct(99), params: options, uvThreadpoolSize: process.env.UV_THREADPOOL_SIZE ?? null, latencies })}\n`,
);
