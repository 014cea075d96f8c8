// What a growing database costs the work that runs all the time (docs/performance.md,
// "Retention and the cost of a growing database"): one round of the outbox worker (every second
// on every instance), one GET /metrics scrape, and one batch of each retention purge, at each
// size of BENCH_SIZES rows (default 10 000 and 1 000 000). For each size it creates a database on
// the machine's PostgreSQL (BENCH_ADMIN_URL, default postgres://postgres@127.0.0.1:5432/postgres),
// migrates it, fills it inside PostgreSQL (generate_series), measures, and drops it.
//
//   node bench/retention.mjs                      # this checkout's build (npm run build first)
//   BENCH_ROOT=/tmp/wt node bench/retention.mjs   # another checkout's build, e.g. the commit before
//
// The service code is imported from BENCH_ROOT/dist/src (tsc's output), so an older checkout is
// measured with its own worker, metrics and migrations; the purges are measured only where the
// checkout has them. Results go to stdout as JSON, progress to stderr.
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createDatabase, dropDatabase, ensurePostgres, log, median, percentile, postgresVersion, ROOT, waitForQuiet, withClient } from './lib.mjs';

/** The checkout whose build is measured. */
const BENCH_ROOT = path.resolve(process.env.BENCH_ROOT ?? ROOT);
/** Table sizes measured, in outbox rows (and as many sessions; see `seed`). */
const SIZES = (process.env.BENCH_SIZES ?? '10000,1000000').split(',').map(Number);
/** Outbox rounds timed per size: 2 minutes of rounds at the worker's 1 s idle period would take longer than needed for a stable median. */
const ROUNDS = 200;
/** Scrapes timed per size. */
const SCRAPES = 100;
/** Untimed rounds and scrapes first: connections opened, plans cached, pages in memory. */
const WARM_UP = 20;
/** Batches timed per purge and size; each deletes a full batch (the seed leaves more than that eligible at every size). */
const PURGE_BATCHES = 4;
/** Sealed successors past their window in the seed: enough for every timed erasure batch to be full, whatever the size (in steady state the seal index holds only the last window's rotations). */
const SEALED = 6_000;
/** Fewest rate-limit windows seeded, half of them ended: enough for full purge batches at the smallest size. */
const MIN_RATE_LIMIT_ROWS = 12_000;
/** The refresh grace window assumed for the seal erasure, in seconds (REFRESH_REUSE_GRACE_SECONDS). */
const GRACE_SECONDS = 10;
/** Batch sizes of the service (src/modules/retention/retention.worker.ts, rate-limits.repo.ts); read from the build when it has them. */
const DEFAULT_BATCH = 1000;
const DEFAULT_SESSION_BATCH = 250;
/** Wait a little for a quiet machine (other engineers run test suites on the same cores), like bench/run.mjs; the load is recorded either way. */
const QUIET = { maxLoad: 1.5, timeoutSeconds: Number(process.env.BENCH_QUIET_SECONDS ?? 60), pollSeconds: 15 };

const distModule = async (relative) => {
  const file = path.join(BENCH_ROOT, 'dist/src', relative);
  return existsSync(file) ? import(pathToFileURL(file).href) : undefined;
};

const { openPostgres } = await distModule('db/pg.js');
const { migrate } = await distModule('db/migrate.js');
const { createOutboxWorker } = await distModule('modules/mail/outbox.worker.js');
const { buildApp, createLogger } = await distModule('app.js');
const { loadConfig } = await distModule('config.js');
const { systemClock } = await distModule('clock.js');
const retentionRepo = await distModule('modules/retention/retention.repo.js');
const retentionWorker = await distModule('modules/retention/retention.worker.js');
const rateLimitsRepo = await distModule('modules/rate-limits/rate-limits.repo.js');

/**
 * Fills a migrated database with `n` outbox rows (mostly sent, spread over the last 14 days, so
 * about half are past the default 7-day retention), `n` sessions with a device and two refresh
 * tokens each (one rotated), spread over 120 days of expiry (about a third ended more than 30
 * days ago), `n` verification codes, {@link SEALED} sealed successors past their window and
 * `n / 10` rate-limit windows (at least {@link MIN_RATE_LIMIT_ROWS}), all inside PostgreSQL.
 * Users: one per 100 sessions. `db` is a plain pg client without the service's statement timeout.
 */
async function seed(db, n) {
  const users = Math.max(10, Math.floor(n / 100));
  await db.query(
    `INSERT INTO users (id, username, email, password_hash, created_at, updated_at)
     SELECT gen_random_uuid(), 'bench_' || i, 'bench_' || i || '@example.test', 'not-a-hash', now(), now() FROM generate_series(1, $1::int) AS i`,
    [users],
  );
  await db.query(
    `INSERT INTO email_outbox (id, kind, recipient, payload, status, attempts, created_at, next_attempt_at, sent_at, expires_at)
     SELECT gen_random_uuid(), 'verification', 'bench_' || i || '@example.test', jsonb_build_object('username', 'bench_' || i),
            CASE WHEN i % 1000 = 0 THEN 'dead' WHEN i % 100 = 0 THEN 'cancelled' ELSE 'sent' END, 1,
            t, t, CASE WHEN i % 100 = 0 THEN NULL ELSE t END, t + interval '15 minutes'
       FROM generate_series(1, $1::int) AS i, LATERAL (SELECT now() - make_interval(secs => (i::float8 / $1) * 14 * 86400)) AS x(t)`,
    [n],
  );
  // A small backlog, as a healthy outbox has: a few rows not yet due, one dead row still holding its code.
  await db.query(
    `INSERT INTO email_outbox (id, kind, recipient, payload, status, created_at, next_attempt_at, expires_at)
     SELECT gen_random_uuid(), 'verification', 'pending_' || i || '@example.test', '{"username":"p","code":"123456"}'::jsonb,
            CASE WHEN i = 1 THEN 'dead' ELSE 'pending' END, now(), now() + interval '1 hour', now() + interval '15 minutes'
       FROM generate_series(1, 10) AS i`,
  );
  await db.query(
    `WITH u AS (SELECT array_agg(id) AS ids FROM users),
          d AS (INSERT INTO devices (id, user_id, created_at)
                SELECT gen_random_uuid(), u.ids[1 + i % $2], now() - interval '120 days' FROM u, generate_series(1, $1::int) AS i
                RETURNING id, user_id),
          s AS (INSERT INTO sessions (id, user_id, device_id, created_at, expires_at, revoked_at)
                SELECT gen_random_uuid(), d.user_id, d.id, now() - interval '120 days', e, CASE WHEN random() < 0.2 THEN e - interval '10 days' END
                  FROM d, LATERAL (SELECT now() - make_interval(secs => random() * 120 * 86400) + interval '30 days') AS x(e)
                RETURNING id),
          t1 AS (INSERT INTO refresh_tokens (id, session_id, token_hash, created_at, rotated_at)
                 SELECT gen_random_uuid(), s.id, md5(s.id::text || 'a'), now() - interval '100 days', now() - interval '90 days' FROM s
                 RETURNING id, session_id)
     INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at)
     SELECT gen_random_uuid(), t1.session_id, md5(t1.session_id::text || 'b'), t1.id, now() - interval '90 days' FROM t1`,
    [n, users],
  );
  // Sealed successors past the window: the backlog of a grace window without erasure.
  await db.query(
    `UPDATE refresh_tokens SET successor_ciphertext = 'sealed', sealed_at = rotated_at
      WHERE id IN (SELECT id FROM refresh_tokens WHERE rotated_at IS NOT NULL LIMIT $1)`,
    [Math.min(n, SEALED)],
  );
  await db.query(
    `WITH u AS (SELECT array_agg(id) AS ids FROM users)
     INSERT INTO verification_codes (id, user_id, email, code_hash, created_at, expires_at, consumed_at)
     SELECT gen_random_uuid(), u.ids[1 + i % $2], 'bench@example.test', md5(i::text), t, t + interval '15 minutes', t + interval '1 minute'
       FROM u, generate_series(1, $1::int) AS i, LATERAL (SELECT now() - make_interval(secs => (i::float8 / $1) * 14 * 86400)) AS x(t)`,
    [n, users],
  );
  await db.query(
    `INSERT INTO rate_limits (key, window_start, hits)
     SELECT 'bench:' || i, now() - make_interval(secs => (i::float8 / $1) * 2 * 86400), 1 FROM generate_series(1, $1::int) AS i`,
    [Math.max(MIN_RATE_LIMIT_ROWS, Math.floor(n / 10))],
  );
  // As autovacuum would have left the tables: statistics and visibility map current.
  await db.query('VACUUM ANALYZE');
}

async function rowCounts(db) {
  const { rows } = await db.query(
    `SELECT (SELECT count(*) FROM email_outbox)::int AS email_outbox, (SELECT count(*) FROM sessions)::int AS sessions,
            (SELECT count(*) FROM refresh_tokens)::int AS refresh_tokens, (SELECT count(*) FROM devices)::int AS devices,
            (SELECT count(*) FROM verification_codes)::int AS verification_codes, (SELECT count(*) FROM rate_limits)::int AS rate_limits`,
  );
  return rows[0];
}

/** Runs `fn` `warmUp` times untimed, then `times` times timed; milliseconds: median, p95, max. */
async function timed(times, warmUp, fn) {
  for (let i = 0; i < warmUp; i++) await fn();
  const ms = [];
  for (let i = 0; i < times; i++) {
    const start = process.hrtime.bigint();
    await fn();
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const round = (x) => Math.round(x * 1000) / 1000;
  return { medianMs: round(median(ms)), p95Ms: round(percentile(ms, 95)), maxMs: round(ms.at(-1)), samples: times };
}

/** One purge batch timed `PURGE_BATCHES` times; also the rows each batch deleted (a full batch when the seed left enough). */
async function timePurge(purge) {
  const rows = [];
  const t = await timed(PURGE_BATCHES, 0, async () => {
    const n = await purge();
    rows.push(typeof n === 'number' ? n : n.sessions);
  });
  return { ...t, rowsPerBatch: median(rows) };
}

async function measure(n) {
  const name = `bench_retention_${n}_${process.pid}`;
  await dropDatabase(name);
  const url = await createDatabase(name);
  const db = openPostgres({ url, poolMax: 4 });
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-retention-'));
  try {
    await migrate(db);
    log(`${n} rows: seeding`);
    const seedStart = Date.now();
    await withClient(url, async (client) => {
      await client.query('SET statement_timeout = 0');
      await seed(client, n);
    });
    const seedSeconds = (Date.now() - seedStart) / 1000;
    const counts = await rowCounts(db);
    log(`${n} rows: seeded in ${seedSeconds.toFixed(1)} s (${JSON.stringify(counts)})`);
    const quiet = await waitForQuiet(QUIET);

    const silent = createLogger('silent');
    const transport = { kind: 'log', send: async () => {}, close() {} };
    const worker = createOutboxWorker({ db, transport, clock: systemClock, log: silent });
    const workerRound = await timed(ROUNDS, WARM_UP, () => worker.runOnce());
    log(`${n} rows: outbox round median ${workerRound.medianMs} ms`);

    const config = loadConfig({ DATABASE_URL: url, DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
    const app = await buildApp({ config, db, logger: silent, startOutboxWorker: false, startRetentionWorker: false });
    await app.ready();
    const scrape = await timed(SCRAPES, WARM_UP, async () => {
      const res = await app.inject({ method: 'GET', url: '/metrics' });
      if (res.statusCode !== 200 || !res.body.includes('auth_outbox_emails{status="pending"}')) throw new Error(`scrape failed: ${res.statusCode}`);
    });
    await app.close();
    log(`${n} rows: scrape median ${scrape.medianMs} ms`);

    let purges;
    if (retentionRepo !== undefined) {
      const batch = retentionWorker?.RETENTION_BATCH_SIZE ?? DEFAULT_BATCH;
      const sessionBatch = retentionWorker?.SESSION_BATCH_SIZE ?? DEFAULT_SESSION_BATCH;
      const daysAgo = (d) => new Date(Date.now() - d * 86_400_000);
      const graceCutoff = () => new Date(Date.now() - GRACE_SECONDS * 1000);
      purges = {
        sessions: await timePurge(() => retentionRepo.purgeEndedSessions(db, daysAgo(30), sessionBatch)),
        verificationCodes: await timePurge(() => retentionRepo.purgeEndedVerificationCodes(db, daysAgo(7), batch)),
        finishedEmails: await timePurge(() => retentionRepo.purgeFinishedEmails(db, daysAgo(7), batch)),
        sealedSuccessors: await timePurge(() => retentionRepo.eraseExpiredSuccessors(db, graceCutoff(), batch)),
        rateLimits: await timePurge(() => rateLimitsRepo.purgeWindows(db, daysAgo(1), batch)),
      };
      // The seal erasure's usual run: nothing past the window (every 5 s on every instance).
      while ((await retentionRepo.eraseExpiredSuccessors(db, graceCutoff(), batch)) > 0);
      purges.sealedSuccessorsIdle = await timed(ROUNDS, WARM_UP, () => retentionRepo.eraseExpiredSuccessors(db, graceCutoff(), batch));
      log(`${n} rows: purge batches ${JSON.stringify(Object.fromEntries(Object.entries(purges).map(([k, v]) => [k, v.medianMs])))}`);
    }
    return { rows: n, seedSeconds, counts, quiet, workerRound, scrape, purges };
  } finally {
    await db.close();
    await dropDatabase(name);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await ensurePostgres();
const results = { root: BENCH_ROOT, postgres: await postgresVersion(), node: process.version, at: new Date().toISOString(), sizes: [] };
for (const n of SIZES) results.sizes.push(await measure(n));
process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
