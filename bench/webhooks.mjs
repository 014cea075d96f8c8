// What events and webhooks cost (docs/performance.md, "Events and webhooks"), on the machine's
// PostgreSQL (BENCH_ADMIN_URL, default postgres://postgres@127.0.0.1:5432/postgres):
//
// 1. The cost an event adds to a request: sign-in's session statement with its `session.created`
//    CTE and without it (the same statement with that CTE cut out), and a transaction shaped like
//    sign-up's (a user inserted, then committed) with and without its `user.created` INSERT
//    (`recordEvent`), each timed in alternation, with no endpoint and with one subscribed. A refresh records no event (unless a rotated token is
//    presented again), so its statement is unchanged.
// 2. The deliveries per second one worker sustains to a local receiver (a child process
//    answering 204 on 127.0.0.1), BENCH_WEBHOOK_EVENTS (5000) events.
// 3. The worker's idle round (fan-out and claim) at each size of BENCH_SIZES delivered events
//    (default 10 000 and 1 000 000): it reads indexes only, so its cost must not grow.
//
//   npm run build && node bench/webhooks.mjs
//
// Results go to stdout as JSON, progress to stderr. Not a test: it asserts nothing.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createDatabase, dropDatabase, ensurePostgres, envNumber, log, median, percentile, postgresVersion, ROOT, waitForQuiet, withClient } from './lib.mjs';

const dist = (relative) => import(pathToFileURL(path.join(ROOT, 'dist/src', relative)).href);
const { openPostgres } = await dist('db/pg.js');
const { migrate } = await dist('db/migrate.js');
const { createLogger } = await dist('app.js');
const { systemClock } = await dist('clock.js');
const { createSignInSession } = await dist('modules/sessions/sessions.repo.js');
const { recordEvent, recordEvents } = await dist('modules/events/events.repo.js');
const { createDeliveryWorker } = await dist('modules/webhooks/delivery.worker.js');
const { createWebhooksService } = await dist('modules/webhooks/webhooks.service.js');
const { sha256 } = await dist('crypto/secrets.js');

/** Statements timed per variant in part 1 (in alternation, after a warm-up). */
const STATEMENTS = Math.floor(envNumber('BENCH_WEBHOOK_STATEMENTS', 2000));
const WARM_UP = 200;
/** Events delivered in part 2. */
const EVENTS = Math.floor(envNumber('BENCH_WEBHOOK_EVENTS', 5000));
/** Delivered events of part 3, one database each. */
const SIZES = (process.env.BENCH_SIZES ?? '10000,1000000').split(',').map(Number).filter((n) => n > 0);
/** Idle rounds timed per size. */
const IDLE_ROUNDS = 200;
const QUIET = { maxLoad: 1.5, timeoutSeconds: Number(process.env.BENCH_QUIET_SECONDS ?? 60), pollSeconds: 15 };
const silent = createLogger('silent');

const round3 = (x) => Math.round(x * 1000) / 1000;
function summary(ms) {
  const sorted = [...ms].sort((a, b) => a - b);
  return { medianMs: round3(median(sorted)), p95Ms: round3(percentile(sorted, 95)), samples: sorted.length };
}
async function time(fn) {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** A fresh migrated database for `fn`, dropped afterwards; `fn(db, url)`. */
async function withDatabase(label, fn) {
  const name = `bench_webhooks_${label}_${process.pid}`;
  await dropDatabase(name);
  const url = await createDatabase(name);
  const db = openPostgres({ url, poolMax: 4 });
  try {
    await migrate(db);
    return await fn(db, url);
  } finally {
    await db.close();
    await dropDatabase(name);
  }
}

/** The SQL and parameters `run` sends, captured instead of run. */
async function captured(run) {
  const seen = [];
  await run({ query: async (sql, params) => (seen.push({ sql, params }), { rows: [], rowCount: 1 }) });
  return seen[0];
}

/** Part 1: the sign-in statement with and without its event, and the extra insert of a transaction. */
async function eventCost() {
  return withDatabase('cost', async (db) => {
    const users = (
      await db.query(
        `INSERT INTO users (id, username, email, password_hash, is_email_verified, created_at, updated_at)
         SELECT gen_random_uuid(), 'bench_' || i, 'bench_' || i || '@example.test', 'not-a-hash', true, now(), now() FROM generate_series(1, 1000) AS i RETURNING id`,
      )
    ).rows.map((r) => r.id);
    const signIn = (userId, now) =>
      captured((q) =>
        createSignInSession(q, {
          sessionId: randomUUID(),
          deviceId: randomUUID(),
          userId,
          checkedPasswordVersion: 1,
          ip: '203.0.113.7',
          userAgent: 'Mozilla/5.0 (X11; Linux x86_64) bench',
          now,
          expiresAt: new Date(now.getTime() + 30 * 86_400_000),
          refreshToken: { id: randomUUID(), tokenHash: sha256(randomUUID()) },
          forgiveRateLimitKeys: [],
          amr: ['pwd'],
        }),
      );
    const sample = await signIn(users[0], new Date());
    const withoutEvent = sample.sql.replace(/, created AS \(\s*INSERT INTO webhook_events[\s\S]*?\n\s*\)\n(\s*)INSERT INTO refresh_tokens/, '\n$1INSERT INTO refresh_tokens');
    if (withoutEvent === sample.sql) throw new Error('the session.created CTE was not found in the sign-in statement');
    const user = { id: users[0], username: 'bench_1', email: 'bench_1@example.test', phone: null, is_email_verified: true, is_phone_verified: false };
    /** Sign-up's own insert: a new user (its code and email rows are left out of both sides alike). */
    const insertUser = (tx) =>
      tx.query(`INSERT INTO users (id, username, email, password_hash, created_at, updated_at) VALUES ($1, $2, $3, 'not-a-hash', now(), now())`, [
        randomUUID(),
        `su_${randomUUID().slice(0, 8)}`,
        `su_${randomUUID()}@example.test`,
      ]);

    const measureWith = async (endpoints) => {
      const signInWith = [];
      const signInWithout = [];
      const insertInTx = [];
      const userOnlyTx = [];
      for (let i = 0; i < WARM_UP + STATEMENTS; i++) {
        const userId = users[i % users.length];
        const a = await signIn(userId, new Date());
        const b = await signIn(userId, new Date());
        const tWith = await time(() => db.query(a.sql, a.params));
        const tWithout = await time(() => db.query(withoutEvent, b.params));
        const tInsert = await time(() =>
          db.transaction(async (tx) => {
            await insertUser(tx);
            await recordEvent(tx, { type: 'user.created', data: { user } }, new Date());
          }),
        );
        const tUserOnly = await time(() => db.transaction((tx) => insertUser(tx)));
        if (i < WARM_UP) continue;
        signInWith.push(tWith);
        signInWithout.push(tWithout);
        insertInTx.push(tInsert);
        userOnlyTx.push(tUserOnly);
      }
      const s = { signInWithEvent: summary(signInWith), signInWithoutEvent: summary(signInWithout), signUpLikeWithEvent: summary(insertInTx), signUpLikeWithoutEvent: summary(userOnlyTx) };
      return {
        endpoints,
        ...s,
        addedToSignInUs: Math.round((s.signInWithEvent.medianMs - s.signInWithoutEvent.medianMs) * 1000),
        addedToSignUpUs: Math.round((s.signUpLikeWithEvent.medianMs - s.signUpLikeWithoutEvent.medianMs) * 1000),
      };
    };
    await waitForQuiet(QUIET);
    const none = await measureWith(0);
    log(`event cost, no endpoint: sign-in +${none.addedToSignInUs} µs, a sign-up-like transaction +${none.addedToSignUpUs} µs`);
    const service = createWebhooksService({ db, clock: systemClock, secretKey: Buffer.alloc(32, 1) });
    await service.add({ url: 'https://hooks.example.com/bench', eventTypes: ['*'] });
    const one = await measureWith(1);
    log(`event cost, one endpoint: sign-in +${one.addedToSignInUs} µs, a sign-up-like transaction +${one.addedToSignUpUs} µs`);
    return [none, one];
  });
}

/** A receiver in a child process on 127.0.0.1 answering 204; resolves with its URL and a stop function. */
async function startReceiver() {
  const script = `const s=require('node:http').createServer((q,r)=>{q.resume();q.on('end',()=>{r.writeHead(204);r.end()})});s.listen(0,'127.0.0.1',()=>console.log('http://127.0.0.1:'+s.address().port+'/hook'))`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(d.toString().trim())));
  return { url, stop: () => child.kill('SIGTERM') };
}

/** Part 2: deliveries per second of one worker. */
async function throughput() {
  return withDatabase('throughput', async (db) => {
    const receiver = await startReceiver();
    try {
      const secretKey = Buffer.alloc(32, 2);
      await createWebhooksService({ db, clock: systemClock, secretKey }).add({ url: receiver.url, eventTypes: ['*'] });
      for (let done = 0; done < EVENTS; done += 1000) {
        const n = Math.min(1000, EVENTS - done);
        await recordEvents(db, Array.from({ length: n }, () => ({ type: 'mfa.enabled', data: { user_id: randomUUID() } })), new Date());
      }
      await waitForQuiet(QUIET);
      const worker = createDeliveryWorker({ db, clock: systemClock, log: silent, secretKey, allowPrivateNetworks: true });
      const start = process.hrtime.bigint();
      worker.start();
      for (;;) {
        const { rows } = await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'delivered'`);
        if (rows[0].n >= EVENTS) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      await worker.stop();
      const perSecond = Math.round(EVENTS / seconds);
      log(`one worker: ${EVENTS} deliveries in ${seconds.toFixed(2)} s, ${perSecond}/s`);
      return { events: EVENTS, seconds: round3(seconds), deliveriesPerSecond: perSecond };
    } finally {
      receiver.stop();
    }
  });
}

/** Part 3: the idle round at `n` delivered events. */
async function idleRound(n) {
  return withDatabase(`idle_${n}`, async (db, url) => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-webhooks-'));
    try {
      const secretKey = Buffer.alloc(32, 3);
      const { webhook } = await createWebhooksService({ db, clock: systemClock, secretKey }).add({ url: 'https://hooks.example.com/idle', eventTypes: ['*'] });
      const seedStart = Date.now();
      await withClient(url, async (client) => {
        await client.query('SET statement_timeout = 0');
        await client.query(
          `WITH e AS (
             INSERT INTO webhook_events (id, type, data, occurred_at)
             SELECT uuid_v7(t), 'session.created', '{"user_id":"x"}', t
               FROM generate_series(1, $1::int) AS i, LATERAL (SELECT now() - make_interval(secs => (1 - i::float8 / $1) * 7 * 86400)) AS x(t)
             RETURNING id, occurred_at
           )
           INSERT INTO webhook_deliveries (id, event_id, endpoint_id, event_type, status, attempts, last_attempt_at, last_status, created_at)
           SELECT uuid_v7(e.occurred_at), e.id, $2, 'session.created', 'delivered', 1, e.occurred_at, 204, e.occurred_at FROM e`,
          [n, webhook.id],
        );
        await client.query('VACUUM ANALYZE');
      });
      const seedSeconds = (Date.now() - seedStart) / 1000;
      log(`${n} delivered events: seeded in ${seedSeconds.toFixed(1)} s`);
      await waitForQuiet(QUIET);
      const worker = createDeliveryWorker({ db, clock: systemClock, log: silent, secretKey, allowPrivateNetworks: false });
      const ms = [];
      for (let i = 0; i < 20 + IDLE_ROUNDS; i++) {
        const t = await time(() => worker.runOnce());
        if (i >= 20) ms.push(t);
      }
      await worker.stop();
      const s = summary(ms);
      log(`${n} delivered events: idle round median ${s.medianMs} ms`);
      return { deliveredEvents: n, seedSeconds, idleRound: s };
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
}

await ensurePostgres();
const results = { postgres: await postgresVersion(), node: process.version, at: new Date().toISOString() };
results.eventCost = await eventCost();
results.throughput = await throughput();
results.idleRound = [];
for (const n of SIZES) results.idleRound.push(await idleRound(n));
process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
