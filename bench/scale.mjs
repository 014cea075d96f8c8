// `npm run bench:scale`: the hot paths at a million users against the same paths at ten thousand
// (docs/performance.md, "At a million users"). Not a test, not part of `npm test` or .ci/run.
//
// 0. Starts a PostgreSQL server of its own (bench/postgres-server.mjs) with a shared_buffers sized
//    for a million users, on huge pages when the system has them reserved, as a deployment of that
//    size has it (BENCH_SCALE_SHARED_BUFFERS=server uses the machine's server as it is configured
//    instead).
// 1. Creates two databases on that PostgreSQL, latchkey_scale_<time>_large and _small,
//    migrated by a first start of the built service, and makes a few real rows through the API
//    (template users' argon2id hashes, registered passkeys).
// 2. Fills both inside PostgreSQL (one INSERT ... SELECT FROM generate_series per table,
//    synchronous_commit off) with the same population at two sizes: BENCH_SCALE_USERS (1,000,000)
//    and BENCH_SCALE_SMALL_USERS (10,000) verified users, each with a device, an active session
//    and two refresh tokens (one rotated); a tenth with TOTP (sealed secret, 10 recovery codes), a
//    tenth with a passkey; an outbox and a code history of half as many rows as users, rate-limit
//    windows and expired challenges. Then VACUUM ANALYZE, as autovacuum would have. Timed per table.
// 3. Plans: builds the service in this process on the large database with a database wrapper
//    that, before each statement a measured route runs, runs EXPLAIN (ANALYZE, BUFFERS, WAL) of that
//    very statement with its very parameters (rolled back), as a custom plan and as a generic
//    plan (the one a prepared statement may switch to). Prints every plan; the run fails (exit 1)
//    when any of them reads a large table (BENCH_SCALE_LARGE_TABLE_ROWS, 10,000 rows) sequentially.
//    The same flows on the small database give the per-statement comparison (buffers, WAL, time).
// 4. Starts the service on each database and measures every scenario on both, alternating slices
//    (large, small, then small, large, ...), over users, sessions and passkeys drawn at random
//    from the whole seeded population (BENCH_SCALE_SAMPLE per scenario, 2,000), and reads the CPU
//    time of each database's own PostgreSQL backends per request.
// 5. Optionally /me and refresh with DATABASE_POOL_MODE=session against transaction (unnamed
//    statements), both straight to PostgreSQL on the large database.
// 6. Writes docs/performance-scale.json and the results part of docs/performance.md ("At a million
//    users"), drops both databases (BENCH_SCALE_KEEP=1 keeps them).
//
// Settings (environment):
//   BENCH_SCALE_USERS (1000000), BENCH_SCALE_SMALL_USERS (10000)   the two population sizes
//   BENCH_SCALE_SAMPLE (2000)     users (sessions, passkeys) each scenario cycles through, per side
//   BENCH_SCENARIOS (all)         subset of me,refresh,sign-in,sign-up,sessions,reset,passkey
//   BENCH_DURATION (30)           seconds measured per side and scenario, in BENCH_ROUNDS (10)
//                                 alternating slices, after BENCH_WARMUP (5) s of warm-up per side:
//                                 each side's service is a process of its own, whose JIT needs
//                                 some thousands of requests per route to settle (with 1 s, the
//                                 first slices of both sides ran at half the speed of the last),
//                                 and 5 s uses each sampled session and passkey at least once.
//                                 A slice's p99 moves with whatever else the machine did in its
//                                 3 s (48 ms in one slice of a side, 306 in another): eight
//                                 repetitions of 15 s in 5 slices (password reset, same code and
//                                 databases) gave p99 ratios from 0.91 to 1.20 and throughput
//                                 ratios from 0.84 to 1.06; more slices narrow that spread
//   BENCH_SCALE_MIN_REQUESTS (5000)  a scenario slower than that in BENCH_DURATION is measured
//                                 longer, up to 90 s per side: its p99 then rests on 50 requests
//   BENCH_CONNECTIONS (32)        concurrencies measured
//   BENCH_SCALE_POOL_MODES (1)    0 skips the session-against-transaction pool mode comparison
//   BENCH_SCALE_KEEP (0)          1 keeps both databases (their names are printed)
//   BENCH_SCALE_LARGE_TABLE_ROWS (10000)  a sequential scan of a table this large fails the run
//   BENCH_WRITE (1)               0 prints the results instead of writing docs/
//   BENCH_SCALE_SHARED_BUFFERS    unset: a server of the run's own with shared_buffers of a quarter
//                                 of the memory, at most 4GB (unless BENCH_ADMIN_URL is set: then
//                                 that server as it is); a size (512MB, 4GB): a server of its own
//                                 with that; server: the machine's server (BENCH_ADMIN_URL)
//   BENCH_SCALE_HUGE_PAGES (auto) the own server's shared memory on huge pages: auto when the
//                                 system has enough reserved (sysctl vm.nr_hugepages; the run says
//                                 how many it needs), on (fail without them), off
//   BENCH_PG_BINDIR               where initdb and pg_ctl are (default: pg_config --bindir, else
//                                 the newest /usr/lib/postgresql/<major>/bin)
//   BENCH_MAX_LOAD (1.5), BENCH_QUIET_TIMEOUT (600)  wait for a quieter machine before measuring (and
//                                 up to 60 s before each scenario)
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { buildApp, createLogger } from '../dist/src/app.js';
import { loadConfig } from '../dist/src/config.js';
import { openPostgres } from '../dist/src/db/pg.js';
import { loadKeyStore } from '../dist/src/modules/keys/keys.service.js';
import { sealSecret } from '../dist/src/crypto/sealed-secret.js';
import { newTotpSecret } from '../dist/src/modules/mfa/totp.js';
import {
  ADMIN_URL,
  apiClient,
  childProcesses,
  combineSlices,
  cookieOf,
  cpuDelta,
  cpuSecondsOf,
  cpuSnapshot,
  createDatabase,
  dropDatabase,
  ensurePostgres,
  envNumber,
  freshenTokens,
  loadAverage,
  log,
  mapLimit,
  measure,
  PASSWORD,
  postgresVersion,
  ROOT,
  SCENARIOS,
  serviceEnv,
  sleep,
  startService,
  waitForQuiet,
  withClient,
  useAdminUrl,
  writeSigningKey,
} from './lib.mjs';
import { assertion } from './passkey.mjs';
import { startOwnPostgres } from './postgres-server.mjs';
import { fmt, table, writeDocs } from './report.mjs';

/** The scenarios of bench/lib.mjs measured here, in this order. */
const SCALE_SCENARIOS = ['me', 'refresh', 'sign-in', 'sign-up', 'sessions', 'reset', 'passkey'];
/** Targets (docs/performance.md, "At a million users"): large req/s at least this share of small's... */
const THROUGHPUT_TARGET = 0.9;
/** ... and large p99 at most this multiple of small's. */
const P99_TARGET = 1.2;
/** Real users (and passkeys) made through the API whose argon2id hashes and public keys the seeded rows copy. */
const TEMPLATES = 4;
/** Longest wait for a quieter machine before each scenario, in seconds (after the first wait, BENCH_QUIET_TIMEOUT). */
const SCENARIO_QUIET_SECONDS = 60;
/** Parallel API calls while preparing (untimed). */
const PREPARE_CONCURRENCY = 4;
/** Prefix of every value derived from a row number, in SQL and here alike. */
const SEED = 'latchkey-scale';

const settings = {
  users: Math.floor(envNumber('BENCH_SCALE_USERS', 1_000_000)),
  smallUsers: Math.floor(envNumber('BENCH_SCALE_SMALL_USERS', 10_000)),
  sample: Math.floor(envNumber('BENCH_SCALE_SAMPLE', 2_000)),
  scenarios: (process.env.BENCH_SCENARIOS ?? SCALE_SCENARIOS.join(',')).split(',').map((s) => s.trim()),
  seconds: envNumber('BENCH_DURATION', 30),
  rounds: Math.max(1, Math.floor(envNumber('BENCH_ROUNDS', 10))),
  warmupSeconds: envNumber('BENCH_WARMUP', 5),
  connections: (process.env.BENCH_CONNECTIONS ?? '32').split(',').map((c) => Math.max(1, Math.floor(Number(c)))),
  poolModes: process.env.BENCH_SCALE_POOL_MODES !== '0',
  keep: process.env.BENCH_SCALE_KEEP === '1',
  largeTableRows: envNumber('BENCH_SCALE_LARGE_TABLE_ROWS', 10_000),
  write: process.env.BENCH_WRITE !== '0',
  maxLoad: envNumber('BENCH_MAX_LOAD', 1.5),
  quietTimeoutSeconds: envNumber('BENCH_QUIET_TIMEOUT', 600),
  sharedBuffers: sharedBuffersSetting(),
  hugePages: hugePagesSetting(),
  minRequests: envNumber('BENCH_SCALE_MIN_REQUESTS', 5_000),
};
/** Longest measurement per side and scenario, in seconds, however slow the scenario. */
const MAX_SIDE_SECONDS = 90;

/**
 * BENCH_SCALE_SHARED_BUFFERS: `server` measures on the machine's server (BENCH_ADMIN_URL) as it is
 * configured; a size (`4GB`, `512MB`) starts a server of the run's own with that `shared_buffers`.
 * Unset: a server of the run's own with a quarter of the machine's memory, at most 4 GB (what the
 * indexes and hot rows of a million users need, docs/operations.md), unless BENCH_ADMIN_URL names
 * a server, which is then used as it is.
 */
function sharedBuffersSetting() {
  const value = process.env.BENCH_SCALE_SHARED_BUFFERS;
  if (value === undefined || value === '') {
    if (process.env.BENCH_ADMIN_URL) return 'server';
    return `${Math.min(4096, Math.floor(os.totalmem() / 4 / 2 ** 20))}MB`;
  }
  if (value === 'server' || /^\d+(kB|MB|GB)$/.test(value)) return value;
  throw new Error(`BENCH_SCALE_SHARED_BUFFERS: "${value}" is neither "server" nor a size such as 4GB or 512MB`);
}
/**
 * BENCH_SCALE_HUGE_PAGES: `auto` (default) puts the run's own server's shared memory on huge
 * pages when the operating system has enough of them reserved, `on` requires it, `off` never.
 */
function hugePagesSetting() {
  const value = process.env.BENCH_SCALE_HUGE_PAGES || 'auto';
  if (!['auto', 'on', 'off'].includes(value)) throw new Error(`BENCH_SCALE_HUGE_PAGES: "${value}" is not one of auto, on, off`);
  return value;
}
for (const name of settings.scenarios) if (!SCALE_SCENARIOS.includes(name)) throw new Error(`BENCH_SCENARIOS: "${name}" is not one of ${SCALE_SCENARIOS.join(', ')}`);
if (settings.smallUsers < 100 || settings.users < settings.smallUsers) throw new Error('BENCH_SCALE_USERS must be at least BENCH_SCALE_SMALL_USERS, which must be at least 100');

// ---------------------------------------------------------------------------------------------
// Values derived from a user's row number g (1..n), computed the same way by the seeding SQL
// (the pg_temp functions below) and by the load generator, so the bench can use any seeded
// session or passkey without storing a secret anywhere: a refresh token is its row's id (MD5 of
// a fixed text and g) followed by the SHA-256 of another. Only in these throw-away databases.

const sha256 = (text) => createHash('sha256').update(text, 'utf8').digest();
const usernameOf = (g) => `user_${g}`;
/** The row id `pg_temp.lk_id(kind, g)` gives, as its 16 bytes. */
const seededIdBytes = (kind, g) => createHash('md5').update(`${SEED}-${kind}:${g}`, 'utf8').digest();
/**
 * The live refresh token of user g's seeded session, in the service's format
 * (docs/api.md#refresh-token-format): its row's id, then 32 bytes; 64 characters of base64url.
 */
const refreshTokenOf = (g) => Buffer.concat([seededIdBytes('refresh-2', g), sha256(`${SEED}-refresh:${g}`)]).toString('base64url');
/** The WebAuthn user handle of user g (users with g % 10 = 5 have a passkey). */
const userHandleOf = (g) => sha256(`${SEED}-handle:${g}`).toString('base64url');
/** The credential id of user g's passkey: 16 bytes, base64url. */
const credentialIdOf = (g) => sha256(`${SEED}-credential:${g}`).subarray(0, 16).toString('base64url');
/** Which template passkey (0-based) user g's passkey copies. */
const passkeyTemplateOf = (g) => Math.floor(g / 10) % TEMPLATES;
/** Users with TOTP: g % 10 = 0; with a passkey: g % 10 = 5. */
const hasTotp = (g) => g % 10 === 0;
const hasPasskey = (g) => g % 10 === 5;

/** Session-scoped helpers of the seeding connection. */
const SEED_FUNCTIONS = `
  CREATE FUNCTION pg_temp.lk_id(kind text, g bigint) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$ SELECT md5('${SEED}-' || kind || ':' || g)::uuid $$;
  CREATE FUNCTION pg_temp.lk_sha(t text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$ SELECT sha256(convert_to(t, 'UTF8')) $$;
  CREATE FUNCTION pg_temp.lk_b64url(b bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT rtrim(translate(encode(b, 'base64'), '+/', '-_'), '=') $$;`;

/**
 * The seeding statements, one per table, for `n` users. Each is an INSERT ... SELECT over
 * generate_series; `templates` holds the real rows copied (argon2id hashes, passkey public keys)
 * and `totp` the sealed secrets (which need the service's key, so they are made here).
 * Ages are spread so that every row is as the service leaves it: sessions created in the last 28
 * days and expiring in the next 2 to 30, codes and outbox rows of the last 7 days (the default
 * retention), rate-limit windows of the last hour.
 */
function seedStatements(n, templates, totp) {
  const outboxRows = Math.floor(n / 2);
  const codeRows = Math.floor(n / 2);
  // A spread of g over 1..n for rows that belong to someone: a fixed permutation (7919 is prime).
  const owner = (i) => `(1 + (${i}::bigint * 7919) % ${n})`;
  return [
    {
      table: 'users',
      rows: n,
      sql: `INSERT INTO users (id, username, email, phone, password_hash, is_email_verified, is_phone_verified, created_at, updated_at, webauthn_user_handle)
            SELECT pg_temp.lk_id('user', g), 'user_' || g, 'user_' || g || '@scale.example',
                   CASE WHEN g % 4 = 0 THEN '+1555' || lpad(g::text, 8, '0') END,
                   ($2::text[])[1 + g % array_length($2::text[], 1)], true, g % 4 = 0, c, c,
                   CASE WHEN g % 10 = 5 THEN pg_temp.lk_sha('${SEED}-handle:' || g) END
              FROM generate_series(1, $1::int) AS g,
                   LATERAL (SELECT now() - make_interval(secs => (($1 - g)::float8 / $1) * 730 * 86400 + 3600)) AS x(c)`,
      params: [n, templates.passwordHashes],
    },
    {
      table: 'devices',
      rows: n,
      sql: `INSERT INTO devices (id, user_id, ip, user_agent, created_at)
            SELECT pg_temp.lk_id('device', g), pg_temp.lk_id('user', g),
                   CASE WHEN g % 3 = 0 THEN '2001:db8::' || to_hex(g) ELSE '198.51.' || (g / 256 % 256) || '.' || (g % 256) END,
                   (ARRAY['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
                          'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1',
                          'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15',
                          'Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0'])[1 + g % 4],
                   now() - make_interval(secs => (g::bigint * 7919) % (28 * 86400))
              FROM generate_series(1, $1::int) AS g`,
      params: [n],
    },
    {
      table: 'sessions',
      rows: n,
      sql: `INSERT INTO sessions (id, user_id, device_id, ip, user_agent, created_at, last_used_at, expires_at, amr)
            SELECT pg_temp.lk_id('session', g), d.user_id, d.id, d.ip, d.user_agent, d.created_at,
                   d.created_at + (now() - d.created_at) * 0.9, d.created_at + interval '30 days',
                   CASE WHEN g % 10 = 0 THEN '{pwd,otp}'::text[] WHEN g % 10 = 5 THEN '{hwk,user}'::text[] ELSE '{pwd}'::text[] END
              FROM generate_series(1, $1::int) AS g JOIN devices d ON d.id = pg_temp.lk_id('device', g)`,
      params: [n],
    },
    {
      // Two per session: the first one rotated (kept to recognise reuse), its successor live.
      table: 'refresh_tokens',
      rows: 2 * n,
      sql: `INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at, rotated_at, format)
            SELECT pg_temp.lk_id('refresh-' || k, g), s.id,
                   pg_temp.lk_b64url(pg_temp.lk_sha(pg_temp.lk_b64url(
                     uuid_send(pg_temp.lk_id('refresh-' || k, g)) || pg_temp.lk_sha(CASE k WHEN 1 THEN '${SEED}-refresh-old:' ELSE '${SEED}-refresh:' END || g)))),
                   CASE k WHEN 2 THEN pg_temp.lk_id('refresh-1', g) END,
                   CASE k WHEN 1 THEN s.created_at ELSE s.last_used_at END,
                   CASE k WHEN 1 THEN s.last_used_at END,
                   2
              FROM generate_series(1, $1::int) AS g JOIN sessions s ON s.id = pg_temp.lk_id('session', g), generate_series(1, 2) AS k`,
      params: [n],
    },
    {
      table: 'mfa_totp',
      rows: totp.gs.length,
      sql: `INSERT INTO mfa_totp (user_id, secret, enabled_at, last_step, created_at)
            SELECT pg_temp.lk_id('user', t.g), t.secret, u.created_at + interval '1 day',
                   floor(extract(epoch FROM now() - interval '1 day') / 30)::bigint - t.g % 1000, u.created_at + interval '1 day'
              FROM unnest($1::int[], $2::text[]) AS t(g, secret) JOIN users u ON u.id = pg_temp.lk_id('user', t.g)`,
      params: [totp.gs, totp.secrets],
    },
    {
      // Ten per TOTP user, some used. Shaped as the service stores them (HMAC-SHA-256, base64url), but of no code.
      table: 'mfa_recovery_codes',
      rows: 10 * totp.gs.length,
      sql: `INSERT INTO mfa_recovery_codes (id, user_id, code_hash, used_at, created_at)
            SELECT pg_temp.lk_id('recovery-' || k, g), pg_temp.lk_id('user', g),
                   pg_temp.lk_b64url(pg_temp.lk_sha('${SEED}-recovery:' || g || ':' || k)),
                   CASE WHEN k <= g % 3 THEN now() - make_interval(days => k) END, now() - interval '30 days'
              FROM generate_series(10, $1::int, 10) AS g, generate_series(1, 10) AS k`,
      params: [n],
    },
    {
      // Copies of the template registrations: their public keys (so the bench holds the private
      // keys and can sign in with any seeded passkey), a credential id of its own each.
      table: 'passkeys',
      rows: Math.floor((n + 5) / 10),
      sql: `INSERT INTO passkeys (id, user_id, credential_id, public_key, counter, transports, device_type, backed_up, name, created_at, last_used_at)
            SELECT pg_temp.lk_id('passkey', g), pg_temp.lk_id('user', g),
                   pg_temp.lk_b64url(substr(pg_temp.lk_sha('${SEED}-credential:' || g), 1, 16)),
                   ($2::bytea[])[1 + (g / 10) % ${TEMPLATES}], 0, '{internal,hybrid}', 'multiDevice', true,
                   CASE WHEN g % 20 = 5 THEN 'Phone' END, now() - interval '60 days', now() - make_interval(secs => g % 86400)
              FROM generate_series(5, $1::int, 10) AS g`,
      params: [n, templates.publicKeys],
    },
    {
      // The last 7 days of email: verification codes and notices sent, password-reset requests
      // (for unknown addresses: suppressed), 1 % cancelled, 0.1 % dead, and a few pending not yet due.
      table: 'email_outbox',
      rows: outboxRows + 10,
      sql: `INSERT INTO email_outbox (id, kind, recipient, payload, status, attempts, created_at, next_attempt_at, sent_at, expires_at)
            SELECT gen_random_uuid(), kind, recipient, payload,
                   CASE WHEN i % 1000 = 0 THEN 'dead' WHEN i % 100 = 0 THEN 'cancelled' WHEN kind = 'password_reset_request' THEN 'suppressed' ELSE 'sent' END,
                   CASE WHEN i % 1000 = 0 THEN 8 ELSE 1 END, t, t, CASE WHEN i % 100 <> 0 THEN t + interval '2 seconds' END,
                   CASE WHEN kind IN ('verification', 'password_reset') THEN t + interval '15 minutes' END
              FROM generate_series(1, $1::int) AS i,
                   LATERAL (SELECT now() - make_interval(secs => (i::float8 / $1) * 7 * 86400),
                                   (ARRAY['verification', 'verification', 'notice', 'notice', 'notice', 'password_reset_request', 'password_reset', 'verification', 'notice', 'notice'])[1 + i % 10],
                                   'user_' || ${owner('i')}) AS x(t, kind, who),
                   LATERAL (SELECT CASE WHEN kind = 'password_reset_request' THEN 'someone_' || i || '@elsewhere.example' ELSE who || '@scale.example' END,
                                   CASE kind WHEN 'notice' THEN jsonb_build_object('notice', 'password_changed', 'username', who, 'at', t, 'ip', '198.51.100.7', 'user_agent', 'Mozilla/5.0')
                                             WHEN 'password_reset_request' THEN '{}'::jsonb
                                             ELSE jsonb_build_object('username', who) END) AS y(recipient, payload)
            UNION ALL
            SELECT gen_random_uuid(), 'verification', 'user_' || i || '@scale.example', jsonb_build_object('username', 'user_' || i, 'code', '123456'),
                   'pending', 0, now(), now() + interval '1 hour', NULL, now() + interval '15 minutes'
              FROM generate_series(1, 10) AS i`,
      params: [outboxRows],
    },
    {
      // The last 7 days of one-time codes: 80 % consumed, 10 % superseded by a resend, 10 % left to expire.
      table: 'verification_codes',
      rows: codeRows,
      sql: `INSERT INTO verification_codes (id, user_id, email, code_hash, attempts, created_at, expires_at, consumed_at, superseded_at, purpose)
            SELECT gen_random_uuid(), pg_temp.lk_id('user', o), 'user_' || o || '@scale.example',
                   pg_temp.lk_b64url(pg_temp.lk_sha('${SEED}-code:' || i)), i % 2, t, t + interval '15 minutes',
                   CASE WHEN i % 10 < 8 THEN t + interval '1 minute' END, CASE WHEN i % 10 = 8 THEN t + interval '2 minutes' END,
                   (ARRAY['verification', 'verification', 'password_reset', 'verification', 'email_change'])[1 + i % 5]
              FROM generate_series(1, $1::int) AS i,
                   LATERAL (SELECT ${owner('i')}, now() - make_interval(secs => (i::float8 / $1) * 7 * 86400 + 1800)) AS x(o, t)`,
      params: [codeRows],
    },
    {
      // Windows of the last hour, keyed as the service keys them (rule name, HMAC of the subject).
      table: 'rate_limits',
      rows: Math.floor(n / 10),
      sql: `INSERT INTO rate_limits (key, window_start, hits)
            SELECT (ARRAY['sign_in_ip', 'sign_in_identifier', 'sign_up_ip', 'password_reset_email'])[1 + i % 4] || ':' || pg_temp.lk_b64url(pg_temp.lk_sha('${SEED}-rl:' || i)),
                   now() - make_interval(secs => i % 3600), 1 + i % 5
              FROM generate_series(1, $1::int) AS i`,
      params: [Math.floor(n / 10)],
    },
    {
      table: 'mfa_challenges',
      rows: Math.floor(n / 100),
      sql: `INSERT INTO mfa_challenges (id, token_hash, user_id, password_hash, password_version, attempts, created_at, expires_at, consumed_at)
            SELECT gen_random_uuid(), pg_temp.lk_b64url(pg_temp.lk_sha('${SEED}-mfa-challenge:' || i)), pg_temp.lk_id('user', g), u.password_hash, 1, 0,
                   now() - make_interval(secs => i % 600), now() - make_interval(secs => i % 600) + interval '300 seconds', CASE WHEN i % 2 = 0 THEN now() END
              FROM generate_series(1, $1::int) AS i CROSS JOIN LATERAL (SELECT 10 * (1 + (i::bigint * 7919) % ($2::int / 10))) AS x(g)
              JOIN users u ON u.id = pg_temp.lk_id('user', x.g)`,
      params: [Math.floor(n / 100), n],
    },
    {
      table: 'webauthn_challenges',
      rows: Math.floor(n / 100),
      sql: `INSERT INTO webauthn_challenges (id, purpose, challenge, user_id, token_hash, created_at, expires_at)
            SELECT gen_random_uuid(), 'authentication', pg_temp.lk_b64url(pg_temp.lk_sha('${SEED}-challenge:' || i)), NULL,
                   pg_temp.lk_b64url(pg_temp.lk_sha('${SEED}-webauthn-cookie:' || i)), now() - make_interval(secs => i % 600),
                   now() - make_interval(secs => i % 600) + interval '300 seconds'
              FROM generate_series(1, $1::int) AS i`,
      params: [Math.floor(n / 100)],
    },
  ];
}

/**
 * Seeds the migrated database at `url` with `n` users (seedStatements), each table in a
 * transaction of its own with synchronous_commit off, then VACUUM ANALYZE.
 * @returns seconds per table, for VACUUM ANALYZE and in all, and the table sizes.
 */
async function seed(url, n, templates, keys) {
  return withClient(url, async (c) => {
    const started = performance.now();
    await c.query(SEED_FUNCTIONS);
    // TOTP secrets are sealed with the service's key and the user's id (AES-256-GCM, the id as
    // associated data): made here, one per TOTP user, and inserted in one statement.
    const sealStarted = performance.now();
    const { rows: totpUsers } = await c.query(`SELECT g, pg_temp.lk_id('user', g)::text AS id FROM generate_series(10, $1::int, 10) AS g`, [n]);
    const totp = { gs: totpUsers.map((r) => r.g), secrets: totpUsers.map((r) => sealSecret(keys.mfa.totpSecretKey, r.id, newTotpSecret())) };
    const sealSeconds = (performance.now() - sealStarted) / 1000;
    const tables = [];
    for (const step of seedStatements(n, templates, totp)) {
      const t0 = performance.now();
      await c.query('BEGIN');
      await c.query('SET LOCAL synchronous_commit = off');
      const { rowCount } = await c.query(step.sql, step.params);
      await c.query('COMMIT');
      const seconds = (performance.now() - t0) / 1000 + (step.table === 'mfa_totp' ? sealSeconds : 0);
      tables.push({ table: step.table, rows: rowCount, seconds });
      log(`  ${step.table}: ${rowCount} rows in ${seconds.toFixed(1)} s`);
    }
    const v0 = performance.now();
    await c.query('VACUUM ANALYZE');
    const vacuumSeconds = (performance.now() - v0) / 1000;
    log(`  VACUUM ANALYZE in ${vacuumSeconds.toFixed(1)} s`);
    // The derivations above must agree with the SQL ones, or the load would hit nothing.
    const { rows: check } = await c.query(
      `SELECT (SELECT token_hash FROM refresh_tokens WHERE session_id = pg_temp.lk_id('session', 5) AND rotated_at IS NULL) AS token_hash,
              (SELECT credential_id FROM passkeys WHERE user_id = pg_temp.lk_id('user', 5)) AS credential_id,
              (SELECT webauthn_user_handle FROM users WHERE username = 'user_5') AS handle`,
    );
    if (check[0].token_hash !== sha256(refreshTokenOf(5)).toString('base64url')) throw new Error('seeded refresh token hash differs from the load generator\'s');
    if (check[0].credential_id !== credentialIdOf(5)) throw new Error('seeded credential id differs from the load generator\'s');
    if (Buffer.from(check[0].handle).toString('base64url') !== userHandleOf(5)) throw new Error('seeded user handle differs from the load generator\'s');
    const { rows: sizes } = await c.query(
      `SELECT relname AS table, reltuples::bigint AS rows, pg_total_relation_size(oid) AS bytes
         FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY pg_total_relation_size(oid) DESC`,
    );
    return { tables, vacuumSeconds, totalSeconds: (performance.now() - started) / 1000, sizes: sizes.map((s) => ({ table: s.table, rows: Number(s.rows), bytes: Number(s.bytes) })) };
  });
}

/**
 * Real rows made by the service through its API on `url`: {@link TEMPLATES} users (their argon2id
 * hashes of PASSWORD) and a passkey of each (bench/passkey.mjs; its public key, and the private
 * key that signs for every seeded copy).
 */
async function makeTemplates(api, dbUrl) {
  const names = Array.from({ length: TEMPLATES }, (_, i) => ({ username: `template_${i}`, phone: `+4999000000${i}` }));
  await mapLimit(names, PREPARE_CONCURRENCY, (u) => api.signUp(u.username, u.phone));
  const credentials = await mapLimit(names, PREPARE_CONCURRENCY, async (u) => api.registerPasskey((await api.signIn(u.username)).accessToken));
  return withClient(dbUrl, async (c) => {
    const hashes = await c.query('SELECT password_hash FROM users WHERE username = ANY($1::text[]) ORDER BY username', [names.map((u) => u.username)]);
    // One at a time: a pg client runs one query at a time (a second one queued on it is deprecated).
    const keys = [];
    for (const cred of credentials) keys.push((await c.query('SELECT public_key FROM passkeys WHERE credential_id = $1', [cred.id])).rows[0].public_key);
    return { passwordHashes: hashes.rows.map((r) => r.password_hash), publicKeys: keys, privateKeys: credentials.map((cred) => cred.privateKey) };
  });
}

// ---------------------------------------------------------------------------------------------
// Plans of the statements the measured routes run.

/** A statement's plan (EXPLAIN text), reduced: sequential scans and indexes read, time, buffers, WAL, and its nodes without figures. */
function planSummary(text) {
  const seqScans = [...text.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]);
  const indexes = [...new Set([...text.matchAll(/(?:Index Scan|Index Only Scan)(?: Backward)? using (\w+)|Bitmap Index Scan on (\w+)/g)].map((m) => m[1] ?? m[2]))];
  const executionMs = Number(/Execution Time: ([\d.]+) ms/.exec(text)?.[1] ?? NaN);
  const buffers = /Buffers: ([^\n]+)/.exec(text)?.[1]?.trim() ?? '';
  // The first Buffers and WAL lines are the top node's, which include its children's.
  const count = (name) => Number(new RegExp(`shared [^\\n]*?\\b${name}=(\\d+)`).exec(/Buffers: ([^\n]+)/.exec(text)?.[1] ?? '')?.[1] ?? 0);
  const wal = /WAL: ([^\n]+)/.exec(text)?.[1] ?? '';
  const walCount = (name) => Number(new RegExp(`\\b${name}=(\\d+)`).exec(wal)?.[1] ?? 0);
  const shape = text
    .split('\n')
    .filter((l) => /->|^\S/.test(l) && !/^(Planning|Execution|Trigger)/.test(l.trim()))
    .map((l) => l.replace(/\s+\(cost=.*$/, '').replace(/\s+\(actual.*$/, '').replace(/\s+\(never executed\)$/, ''))
    .join('\n');
  return { seqScans, indexes, executionMs, buffers, sharedHit: count('hit'), sharedRead: count('read'), walFpi: walCount('fpi'), walBytes: walCount('bytes'), shape };
}

/** The repository function (or service) that sent the statement: the first frame in dist/src/modules. */
function callerOf(stack) {
  for (const line of stack.split('\n')) {
    const m = /at (?:async )?([\w.$<>]+) \(.*\/dist\/src\/modules\/([^:]+):\d+:\d+\)/.exec(line) ?? /at .*\/dist\/src\/modules\/([^:]+):\d+:\d+/.exec(line);
    if (m !== null) return m.length === 3 ? `${m[2].replace(/\.js$/, '')} ${m[1]}` : m[1].replace(/\.js$/, '');
  }
  return 'unknown';
}

/** SQL text as one line, for reading. */
const oneLine = (sql) => sql.replace(/\s+/g, ' ').trim();

/**
 * A {@link Db} that, before each statement of a labelled flow, runs EXPLAIN (ANALYZE, BUFFERS, WAL) of
 * it with its parameters, custom (as the statement runs unnamed, and the first five times
 * prepared) and generic (PREPARE with plan_cache_mode = force_generic_plan: the plan a prepared
 * statement may switch to after that), and rolls the EXPLAIN's effects back: inside the caller's
 * transaction under a savepoint, else on `explainer` in a transaction of its own. Each SQL text
 * is explained once, the first time it is seen.
 */
function explainingDb(db, explainer) {
  const seen = new Map();
  const results = [];
  let label;
  let queue = Promise.resolve();
  const serial = (fn) => {
    const next = queue.then(fn, fn);
    queue = next.catch(() => {});
    return next;
  };
  const literal = (value) => (value === null || value === undefined ? 'NULL' : pg.escapeLiteral(String(pg.utils.prepareValue(value))));
  const planText = (result) => result.rows.map((r) => r['QUERY PLAN']).join('\n');
  /**
   * EXPLAIN both ways with `run` (runs one statement on the right connection), each between
   * `begin` and `rollback`. PREPARE is not transactional: the generic one's statement is
   * deallocated by name after the rollback (never DEALLOCATE ALL: the connection may be one of
   * the service's, with its own prepared statements).
   */
  const explainBoth = async (run, begin, rollback, sql, params) => {
    const out = {};
    const attempt = async (kind, fn) => {
      await run(begin);
      try {
        out[kind] = await fn();
      } catch (err) {
        out[`${kind}Error`] = err.message;
      } finally {
        await run(rollback);
      }
    };
    await attempt('custom', async () => planText(await run(`EXPLAIN (ANALYZE, BUFFERS, WAL) ${sql}`, params)));
    let prepared = false;
    await attempt('generic', async () => {
      await run(`PREPARE lk_generic AS ${sql}`);
      prepared = true;
      await run('SET LOCAL plan_cache_mode = force_generic_plan');
      const args = params.length === 0 ? '' : `(${params.map(literal).join(', ')})`;
      return planText(await run(`EXPLAIN (ANALYZE, BUFFERS, WAL) EXECUTE lk_generic${args}`));
    });
    if (prepared) await run('DEALLOCATE lk_generic');
    return out;
  };
  const before = async (sql, params, tx) => {
    if (label === undefined || /^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b/i.test(sql)) return;
    const caller = callerOf(new Error().stack ?? '');
    const first = seen.get(sql);
    if (first !== undefined) {
      if (!first.scenarios.includes(label)) first.scenarios.push(label);
      return;
    }
    const entry = { scenario: label, scenarios: [label], caller, sql: oneLine(sql), params: params.length, inTransaction: tx !== undefined };
    seen.set(sql, entry);
    results.push(entry);
    Object.assign(
      entry,
      await serial(() =>
        tx === undefined
          ? explainBoth((text, values) => explainer.query(text, values), "BEGIN; SET LOCAL lock_timeout = '2s'", 'ROLLBACK', sql, params)
          : explainBoth((text, values) => tx.query(text, values), 'SAVEPOINT lk_explain', 'ROLLBACK TO SAVEPOINT lk_explain; RELEASE SAVEPOINT lk_explain', sql, params),
      ),
    );
  };
  const wrapped = (q, inTx) => ({
    async query(sql, params = []) {
      await before(sql, params, inTx ? q : undefined);
      return q.query(sql, params);
    },
  });
  return {
    db: {
      ...db,
      kind: db.kind,
      query: wrapped(db, false).query,
      transaction: (fn) => db.transaction((tx) => fn(wrapped(tx, true))),
    },
    /** Statements from now on are recorded under `name` (undefined: not recorded). */
    label(name) {
      label = name;
    },
    results,
  };
}

/**
 * Runs each measured flow once, in this process, on the large database, with users drawn from the
 * seeded population (not those the measurement uses), and collects the plans of every statement.
 * @returns the statements with their plans.
 */
async function capturePlans({ env, dbUrl, n, templates }) {
  const config = loadConfig(env);
  const base = openPostgres({ url: dbUrl, poolMax: config.databasePoolMax, poolMode: config.databasePoolMode });
  const explainer = new pg.Client({ connectionString: dbUrl });
  await explainer.connect();
  const recorder = explainingDb(base, explainer);
  const app = await buildApp({ config, db: recorder.db, logger: createLogger('warn'), startOutboxWorker: false, startRetentionWorker: false });
  await app.ready();
  const call = async (expected, options) => {
    const res = await app.inject({ ...options, url: `/auth/v0${options.url}`, remoteAddress: '127.0.0.1' });
    if (res.statusCode !== expected) throw new Error(`plans: ${options.method} ${options.url} answered ${res.statusCode}: ${res.body}`);
    return res;
  };
  const { refresh: g, signIn, reset, passkey: pk } = planUsers(n);
  try {
    recorder.label('refresh');
    const refreshed = await call(200, { method: 'POST', url: '/refresh', headers: { cookie: `refresh_token=${refreshTokenOf(g)}` } });
    const bearer = { authorization: `Bearer ${refreshed.json().tokens.access_token}` };
    recorder.label('me');
    await call(200, { method: 'GET', url: '/me', headers: bearer });
    recorder.label('sessions');
    await call(200, { method: 'GET', url: '/sessions', headers: bearer });
    recorder.label('sign-in');
    await call(200, { method: 'POST', url: '/sign-in', payload: { username: usernameOf(signIn), password: PASSWORD } });
    recorder.label('sign-up');
    await call(201, { method: 'POST', url: '/sign-up', payload: { username: 'plan_sign_up', phone: '+79999999999', password: PASSWORD } });
    recorder.label('sign-up (email)');
    await call(201, { method: 'POST', url: '/sign-up', payload: { username: 'plan_sign_up_email', email: 'plan_sign_up@scale.example', password: PASSWORD } });
    recorder.label('reset');
    await call(204, { method: 'POST', url: '/password-reset', payload: { email: 'nobody@elsewhere.example' } });
    await call(204, { method: 'POST', url: '/password-reset', payload: { email: `${usernameOf(reset)}@scale.example` } });
    recorder.label('outbox worker (reset, sign-up)');
    await app.outbox.runOnce();
    recorder.label('passkey');
    const options = await call(200, { method: 'POST', url: '/sign-in/passkey/options' });
    const cookie = cookieOf(options.headers['set-cookie'], 'webauthn_challenge');
    const credential = { id: credentialIdOf(pk), privateKey: templates.privateKeys[passkeyTemplateOf(pk)], userHandle: userHandleOf(pk) };
    await call(200, { method: 'POST', url: '/sign-in/passkey', headers: { cookie: `webauthn_challenge=${cookie}` }, payload: { response: assertion(credential, options.json().challenge) } });
    recorder.label(undefined);
  } finally {
    await app.close();
    await base.close();
    await explainer.end();
  }
  return recorder.results;
}

/**
 * The seeded users whose rows the plan capture uses (its refresh rotates one seeded token, for
 * example): among the newest, and never drawn for the measurement. None has TOTP; `passkey` has a passkey.
 */
function planUsers(n) {
  const base = Math.floor((n - 20) / 10) * 10;
  return { refresh: base + 9, signIn: base + 8, reset: base + 7, passkey: base + 5 };
}

/** Rows per table (planner statistics after VACUUM ANALYZE) of the database at `url`. */
async function tableRows(url) {
  return withClient(url, async (c) => {
    const { rows } = await c.query(`SELECT relname, reltuples::bigint AS n FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace`);
    return new Map(rows.map((r) => [r.relname, Number(r.n)]));
  });
}

/** Prints every plan to stdout; @returns the statements whose plan scans a large table sequentially. */
function reportPlans(statements, rowsByTable) {
  const failures = [];
  for (const s of statements) {
    s.customSummary = s.custom === undefined ? undefined : planSummary(s.custom);
    s.genericSummary = s.generic === undefined ? undefined : planSummary(s.generic);
    const large = (summary) => (summary?.seqScans ?? []).filter((t) => (rowsByTable.get(t) ?? 0) >= settings.largeTableRows);
    s.largeSeqScans = [...new Set([...large(s.customSummary), ...large(s.genericSummary)])];
    if (s.largeSeqScans.length > 0) failures.push(s);
    const out = [
      `\n=== ${s.scenarios.join(', ')} · ${s.caller}${s.inTransaction ? ' (in a transaction)' : ''}`,
      s.sql,
      '--- custom plan (unnamed statements; the first executions of a prepared one)',
      s.custom ?? `EXPLAIN failed: ${s.customError}`,
      '--- generic plan (a prepared statement after its first executions)',
      s.generic === undefined ? `EXPLAIN failed: ${s.genericError}` : s.genericSummary.shape === s.customSummary?.shape ? '(same nodes as the custom plan)' : s.generic,
    ];
    if (s.largeSeqScans.length > 0) out.push(`!!! sequential scan of ${s.largeSeqScans.join(', ')}`);
    process.stdout.write(`${out.join('\n')}\n`);
  }
  return failures;
}

// ---------------------------------------------------------------------------------------------
// Measurement.

/** Distinct random integers of 1..n for which `keep(g)` holds, `count` of them (fewer if there are fewer). */
function drawUsers(n, count, keep, taken) {
  const picked = [];
  for (let tries = 0; picked.length < count && tries < count * 200; tries++) {
    const g = 1 + Math.floor(Math.random() * n);
    if (keep(g) && !taken.has(g)) {
      taken.add(g);
      picked.push(g);
    }
  }
  return picked;
}

/**
 * The data of bench/lib.mjs's scenarios for one side, drawn from its seeded population: sessions
 * for `/me` and `GET /sessions` (an access token each, from a refresh of the seeded token),
 * seeded refresh tokens for `refresh`, usernames for sign-in (users without TOTP), passkeys.
 * Disjoint sets, so that no two scenarios use one session.
 */
async function prepareData(api, n, sample, privateKeys) {
  const taken = new Set(Object.values(planUsers(n)));
  const meUsers = drawUsers(n, sample, () => true, taken);
  // Without TOTP: when the pool of tokens runs low, bench/lib.mjs's fillRefreshPool signs these users in again.
  const refreshUsers = drawUsers(n, sample, (g) => !hasTotp(g), taken);
  const signInUsers = drawUsers(n, sample, (g) => !hasTotp(g), taken);
  const passkeyUsers = drawUsers(n, Math.min(sample, Math.floor(settings.smallUsers / 20)), hasPasskey, taken);
  const meSessions = await mapLimit(meUsers, PREPARE_CONCURRENCY, (g) => api.refresh(refreshTokenOf(g)));
  return {
    meSessions,
    listerSessions: meSessions,
    freshAt: Date.now(),
    refreshPool: refreshUsers.map(refreshTokenOf),
    refreshUsers: refreshUsers.map(usernameOf),
    signInUsers: signInUsers.map(usernameOf),
    signUpSeq: 0,
    resetSeq: 0,
    passkeys: passkeyUsers.map((g) => ({ id: credentialIdOf(g), privateKey: privateKeys[passkeyTemplateOf(g)], userHandle: userHandleOf(g) })),
    sampled: { me: meUsers.length, refresh: refreshUsers.length, signIn: signInUsers.length, passkey: passkeyUsers.length },
  };
}

/** Access tokens live 900 s by default: the `/me` and `/sessions` tokens are renewed when older than this. */
const TOKEN_RENEW_MS = 300_000;

/** The scenarios of bench/lib.mjs, with token renewal only when due (the pools are large). */
function scaleScenarios() {
  return settings.scenarios.map((name) => {
    const base = SCENARIOS.find((s) => s.name === name);
    if (name !== 'me' && name !== 'sessions') return base;
    return {
      ...base,
      label: name === 'sessions' ? 'GET /auth/v0/sessions' : base.label,
      async prepare(api, data) {
        if (Date.now() - data.freshAt < TOKEN_RENEW_MS) return;
        await freshenTokens(api, data.meSessions);
        data.freshAt = Date.now();
      },
    };
  });
}

/**
 * CPU seconds so far of each client backend connected to `database` (by pid, from /proc): the
 * PostgreSQL work of that database's service alone, where the machine's other databases (other
 * people's tests) would blur a count of every postgres process.
 */
async function backendCpu(admin, database) {
  const { rows } = await admin.query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'", [database]);
  const seconds = new Map();
  for (const { pid } of rows) {
    try {
      seconds.set(pid, cpuSecondsOf(`/proc/${pid}/stat`));
    } catch {
      // ended meanwhile
    }
  }
  return seconds;
}

/** CPU seconds the backends spent between two {@link backendCpu} readings (a backend new since the first counts whole). */
const backendCpuDelta = (before, after) => [...after].reduce((sum, [pid, s]) => sum + s - (before.get(pid) ?? 0), 0);

/**
 * Shared-buffer page accesses of `database` so far (pg_stat_database): `hit`, found in
 * PostgreSQL's `shared_buffers`; `read`, read from outside them (the operating system's cache or
 * the disk). And the server's WAL so far (pg_stat_wal, every database: the other side's service
 * is idle meanwhile but for its workers' polls): `fpi`, full-page images (a page's first change
 * after a checkpoint is logged whole), `walBytes`. And `deleted`, rows deleted in `database`: of
 * the measured routes only the passkey sign-in deletes a row (its used challenge), so the rest are
 * the service's background purges (retention, every 10 minutes), which a slice should not be
 * charged with unnoticed. A backend reports its counts when a
 * transaction ends, at most once a second, and within a second of going idle: read after
 * {@link STATS_FLUSH_MS} of idleness, they are whole.
 */
async function databaseCounters(admin, database) {
  const { rows } = await admin.query(
    `SELECT d.blks_hit::float8 AS hit, d.blks_read::float8 AS read, w.wal_fpi::float8 AS fpi, w.wal_bytes::float8 AS wal_bytes,
            d.tup_deleted::float8 AS deleted
       FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = $1`,
    [database],
  );
  const r = rows[0] ?? { hit: 0, read: 0, fpi: 0, wal_bytes: 0, deleted: 0 };
  return { hit: r.hit, read: r.read, fpi: r.fpi, walBytes: r.wal_bytes, deleted: r.deleted };
}

/** How long an idle backend may hold its statistics before reporting them (PGSTAT_MIN_INTERVAL, 1 s), with a margin. */
const STATS_FLUSH_MS = 1_200;

/** Busy CPU below which, over {@link SETTLE_POLL_MS}, a service counts as idle. */
const SETTLE_IDLE_SECONDS = 0.01;
const SETTLE_POLL_MS = 100;
/** Longest wait for a service to become idle after a slice. */
const SETTLE_TIMEOUT_MS = 10_000;

/**
 * Waits until the service `pid` is idle (its threads used less than {@link SETTLE_IDLE_SECONDS}
 * of CPU in {@link SETTLE_POLL_MS}), for at most {@link SETTLE_TIMEOUT_MS}. Requests still in
 * flight when a slice stops go on in the service (argon2id hashes queued on libuv's pool): without
 * this, a sign-up slice's backlog would run in the next slice, the other side's or the next
 * scenario's, and be counted there.
 */
async function settle(pid) {
  const busy = () => {
    const s = cpuSnapshot(pid);
    return s.mainThread + s.otherThreads;
  };
  let last = busy();
  for (let waited = 0; waited < SETTLE_TIMEOUT_MS; waited += SETTLE_POLL_MS) {
    await sleep(SETTLE_POLL_MS);
    const now = busy();
    if (now - last < SETTLE_IDLE_SECONDS) return;
    last = now;
  }
}

/**
 * One scenario on two sides (services with their API clients and data): a warm-up of each, then
 * `rounds` rounds of a slice on each, the side that goes first alternating, so that drift of the
 * machine's speed weighs on both alike, each slice followed by a wait until its service is idle.
 * Slices combined as bench/run.mjs combines them.
 */
async function measureSides(scenario, connections, sides, admin, { blocks = true } = {}) {
  const slice = async (side, seconds) => {
    await scenario.prepare?.(side.api, side.data, { connections });
    const blocksBefore = blocks ? await databaseCounters(admin, side.database) : null;
    const before = cpuSnapshot(side.service.pid);
    const backendsBefore = await backendCpu(admin, side.database);
    const m = await measure({ url: side.service.url, requests: scenario.requests(side.data), connections, seconds });
    const backendSeconds = backendCpuDelta(backendsBefore, await backendCpu(admin, side.database));
    const cpu = cpuDelta(before, cpuSnapshot(side.service.pid));
    scenario.after?.(side.data);
    await settle(side.service.pid);
    let pages = null;
    if (blocks) {
      await sleep(STATS_FLUSH_MS);
      const after = await databaseCounters(admin, side.database);
      pages = Object.fromEntries(Object.keys(after).map((key) => [key, after[key] - blocksBefore[key]]));
    }
    return { ...m, cpu, backendSeconds, pages };
  };
  const warmups = [];
  for (const side of sides) warmups.push(await slice(side, settings.warmupSeconds));
  // A p99 is the 1 % tail: at 70 sign-ins a second, 15 s leave ten requests beyond it, and two
  // runs disagreed by a third. Slow scenarios are measured long enough to reach
  // BENCH_SCALE_MIN_REQUESTS per side at the warm-up's rate of the slower side (at most
  // MAX_SIDE_SECONDS).
  const slowerRate = Math.min(...warmups.map((w) => w.ok / settings.warmupSeconds));
  const sideSeconds = Math.min(MAX_SIDE_SECONDS, Math.max(settings.seconds, slowerRate > 0 ? settings.minRequests / slowerRate : settings.seconds));
  const sliceSeconds = sideSeconds / settings.rounds;
  const slices = sides.map(() => []);
  for (let round = 0; round < settings.rounds; round++) {
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const i of order) slices[i].push(await slice(sides[i], sliceSeconds));
  }
  const [a, b] = slices.map((s) => {
    const combined = combineSlices(s);
    const backendSeconds = s.reduce((sum, x) => sum + x.backendSeconds, 0);
    const perRequest = (total) => (combined.ok > 0 ? total / combined.ok : null);
    const pagesPerRequest = blocks ? Object.fromEntries(Object.keys(s[0].pages).map((key) => [key, perRequest(s.reduce((sum, x) => sum + x.pages[key], 0))])) : null;
    return {
      ...combined,
      databaseBackendMicrosecondsPerRequest: perRequest(backendSeconds * 1e6),
      pagesPerRequest,
      sliceP99Ms: s.map((x) => x.p99Ms),
      sliceRowsDeleted: blocks ? s.map((x) => x.pages.deleted) : null,
    };
  });
  const throughputRatio = b.reqPerSec > 0 ? a.reqPerSec / b.reqPerSec : null;
  const p99Ratio = b.p99Ms > 0 ? a.p99Ms / b.p99Ms : null;
  log(
    `${scenario.name.padEnd(8)} c=${connections} ${sides[0].name} ${a.reqPerSec.toFixed(0)} req/s p99 ${a.p99Ms?.toFixed(2)} ms non2xx ${a.non2xx} | ` +
      `${sides[1].name} ${b.reqPerSec.toFixed(0)} req/s p99 ${b.p99Ms?.toFixed(2)} ms non2xx ${b.non2xx} | ratio ${throughputRatio?.toFixed(3)}, p99 ×${p99Ratio?.toFixed(2)}` +
      ` | PostgreSQL µs/req ${fmt(a.databaseBackendMicrosecondsPerRequest)} / ${fmt(b.databaseBackendMicrosecondsPerRequest)}` +
      (blocks
        ? ` | pages/req read ${fmt(a.pagesPerRequest.read, 2)} of ${fmt(a.pagesPerRequest.hit + a.pagesPerRequest.read, 1)} / ${fmt(b.pagesPerRequest.read, 2)} of ${fmt(b.pagesPerRequest.hit + b.pagesPerRequest.read, 1)}` +
          ` | FPI/req ${fmt(a.pagesPerRequest.fpi, 2)} / ${fmt(b.pagesPerRequest.fpi, 2)}, WAL bytes/req ${fmt(a.pagesPerRequest.walBytes)} / ${fmt(b.pagesPerRequest.walBytes)}`
        : ''),
  );
  for (const [i, side] of sides.entries()) {
    const x = i === 0 ? a : b;
    log(`  ${side.name} slices: p99 ms ${x.sliceP99Ms.map((v) => fmt(v, 1)).join(', ')}${x.sliceRowsDeleted ? ` | rows deleted ${x.sliceRowsDeleted.join(', ')}` : ''}`);
  }
  return { scenario: scenario.name, label: scenario.label, connections, seconds: sideSeconds, load1: loadAverage().one, [sides[0].name]: a, [sides[1].name]: b, throughputRatio, p99Ratio };
}

// ---------------------------------------------------------------------------------------------
// Report.

const BEGIN = '<!-- bench:scale:begin (written by npm run bench:scale; edit outside the markers) -->';
const END = '<!-- bench:scale:end -->';

function renderScale(report) {
  const { settings: s } = report;
  const size = (n) => (n >= 1_000_000 && n % 1_000_000 === 0 ? `${n / 1_000_000}M` : n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n));
  const [L, S] = [size(s.users), size(s.smallUsers)];
  const mib = (bytes) => (bytes / 2 ** 20).toFixed(0);
  const largeSizes = new Map(report.seeding.large.sizes.map((x) => [x.table, x]));
  const lines = [
    BEGIN,
    '',
    `Run of ${report.generatedAt.slice(0, 10)} at ${report.revision ?? 'an unknown revision'}: ${report.machine.cpus} × ${report.machine.cpuModel}, ${report.machine.memoryGiB} GiB, Node ${report.machine.node}, PostgreSQL ${report.machine.postgres} (shared_buffers ${report.machine.sharedBuffers}${report.machine.hugePages ? ' on huge pages' : report.machine.hugePages === false ? ' on 4 kB pages' : ''}, ${report.machine.ownServer ? 'a server started by the run' : 'the machine\'s server as configured'}); 1-minute load ${report.quiet.after.one} before measuring.`,
    '',
    `#### Seeding (${L} users; ${S} users in brackets)`,
    '',
    table(
      ['Table', 'Rows', 'Seconds', 'Size after VACUUM, MiB'],
      [
        ...report.seeding.large.tables.map((t) => {
          const small = report.seeding.small.tables.find((x) => x.table === t.table);
          return [t.table, `${t.rows.toLocaleString('en-US')} (${small?.rows.toLocaleString('en-US')})`, `${fmt(t.seconds, 1)} (${fmt(small?.seconds, 2)})`, mib(largeSizes.get(t.table)?.bytes ?? 0)];
        }),
        ['VACUUM ANALYZE', '', `${fmt(report.seeding.large.vacuumSeconds, 1)} (${fmt(report.seeding.small.vacuumSeconds, 2)})`, ''],
        ['**Total**', '', `**${fmt(report.seeding.large.totalSeconds, 1)}** (${fmt(report.seeding.small.totalSeconds, 1)})`, mib(report.seeding.large.sizes.reduce((a, x) => a + x.bytes, 0))],
      ],
    ),
    '',
    `#### Hot paths, ${L} against ${S} (at least ${s.seconds} s per side in ${s.rounds} alternating slices, after ${s.warmupSeconds} s of warm-up, longer where ${s.seconds} s would give fewer than ${s.minRequests.toLocaleString('en-US')} requests; ${s.sample} users drawn per scenario)`,
    '',
    table(
      ['Scenario', 'Conn.', 's per side', `${L} req/s`, `${S} req/s`, 'Ratio (≥ 0.9)', `${L} p99 ms (slices)`, `${S} p99 ms (slices)`, 'p99 × (≤ 1.2)', `PostgreSQL µs/req, ${L} / ${S}`, `Pages/req read from outside shared_buffers, of all, ${L} / ${S}`, `WAL bytes (full-page images)/req, ${L} / ${S}`, `Rows purged meanwhile, ${L} / ${S}`, 'Load after', 'Met'],
      report.results.map((r) => {
        const met = r.throughputRatio >= THROUGHPUT_TARGET && r.p99Ratio <= P99_TARGET;
        const pgUs = (side) => fmt(side.databaseBackendMicrosecondsPerRequest);
        const pages = (side) => (side.pagesPerRequest ? `${fmt(side.pagesPerRequest.read, 2)} of ${fmt(side.pagesPerRequest.hit + side.pagesPerRequest.read, 1)}` : 'n/a');
        const wal = (side) => (side.pagesPerRequest ? `${fmt(side.pagesPerRequest.walBytes)} (${fmt(side.pagesPerRequest.fpi, 2)})` : 'n/a');
        const p99 = (side) => `${fmt(side.p99Ms, 1)} (${fmt(Math.min(...side.sliceP99Ms))}–${fmt(Math.max(...side.sliceP99Ms))})`;
        const purged = (side) => (side.sliceRowsDeleted ? fmt(side.sliceRowsDeleted.reduce((a, x) => a + x, 0)) : 'n/a');
        return [r.label, r.connections, fmt(r.seconds), fmt(r.large.reqPerSec), fmt(r.small.reqPerSec), fmt(r.throughputRatio, 3), p99(r.large), p99(r.small), fmt(r.p99Ratio, 3), `${pgUs(r.large)} / ${pgUs(r.small)}`, `${pages(r.large)} / ${pages(r.small)}`, `${wal(r.large)} / ${wal(r.small)}`, `${purged(r.large)} / ${purged(r.small)}`, fmt(r.load1, 1), met ? 'yes' : '**no**'];
      }),
    ),
    '',
    `#### Plans (${report.plans.statements.length} statements, EXPLAIN (ANALYZE, BUFFERS, WAL) once each; ${S} in brackets)`,
    '',
    'Indexes read by the custom plan; "same" when the generic plan has the same nodes. Buffers: shared pages found in PostgreSQL\'s cache / read from outside it. FPI: full-page images written to the WAL.',
    '',
    table(
      ['Flow', 'Statement of', 'Indexes', 'Generic plan', 'ms', 'Buffers hit / read', 'FPI'],
      report.plans.statements.map((p) => {
        const c = p.customSummary;
        const b = p.small;
        return [
          p.scenarios.join(', '),
          `\`${p.caller}\``,
          c === undefined ? `failed: ${p.customError}` : c.indexes.length === 0 ? (c.seqScans.length === 0 ? 'none read' : `**Seq Scan ${c.seqScans.join(', ')}**`) : c.indexes.join(', '),
          p.genericSummary === undefined ? `failed: ${p.genericError}` : p.genericSummary.shape === c?.shape ? 'same' : p.genericSummary.indexes.join(', ') || 'other',
          `${fmt(c?.executionMs, 2)} (${fmt(b?.executionMs, 2)})`,
          `${c?.sharedHit ?? ''} / ${c?.sharedRead ?? ''} (${b?.sharedHit ?? ''} / ${b?.sharedRead ?? ''})`,
          `${c?.walFpi ?? ''} (${b?.walFpi ?? ''})`,
        ];
      }),
    ),
    '',
    report.plans.failures.length === 0
      ? `No plan reads a table of ${s.largeTableRows.toLocaleString('en-US')} rows or more sequentially.`
      : `**Sequential scans of large tables**: ${report.plans.failures.map((f) => `${f.caller} (${f.largeSeqScans.join(', ')})`).join('; ')}.`,
  ];
  if (report.poolModes !== null) {
    lines.push(
      '',
      `#### DATABASE_POOL_MODE on the ${L} database (both straight to PostgreSQL)`,
      '',
      table(
        ['Scenario', 'Conn.', 'session req/s', 'transaction req/s', 'transaction / session', 'session p99 ms', 'transaction p99 ms', 'PostgreSQL µs/req, session / transaction', 'Load after'],
        report.poolModes.map((r) => [r.label, r.connections, fmt(r.session.reqPerSec), fmt(r.transaction.reqPerSec), fmt(r.throughputRatio && 1 / r.throughputRatio, 2), fmt(r.session.p99Ms, 1), fmt(r.transaction.p99Ms, 1), `${fmt(r.session.databaseBackendMicrosecondsPerRequest)} / ${fmt(r.transaction.databaseBackendMicrosecondsPerRequest)}`, fmt(r.load1, 1)]),
      ),
    );
  }
  lines.push('', 'Raw numbers and every plan: [performance-scale.json](performance-scale.json).', '', END, '');
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------

const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const names = { large: `latchkey_scale_${stamp}_large`, small: `latchkey_scale_${stamp}_small` };
const tmp = mkdtempSync(path.join(os.tmpdir(), 'latchkey-scale-'));
const logDir = path.join(tmp, 'logs');
mkdirSync(logDir);
/** Child processes still running, stopped on the way out whatever happens. */
const { track, stopAll } = childProcesses();
let cleanedUp = false;
/** The benchmark's own PostgreSQL server (bench/postgres-server.mjs), when it runs one. */
let ownServer = null;
async function cleanup() {
  if (cleanedUp) return;
  cleanedUp = true;
  await stopAll();
  if (settings.keep) {
    log(`kept ${names.large} and ${names.small} (BENCH_SCALE_KEEP=1) on ${ADMIN_URL}`);
    if (ownServer !== null) log(`the server keeps running in ${ownServer.dir}; stop it with pg_ctl -D ${ownServer.dir}/data stop, then delete the directory`);
  } else {
    for (const name of Object.values(names)) await dropDatabase(name).catch((err) => log(`could not drop ${name}: ${err.message}`));
    ownServer?.stop();
  }
  rmSync(tmp, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    log(`${signal}: stopping children and dropping the databases`);
    cleanup().finally(() => process.exit(130));
  });
}

async function main() {
  if (settings.sharedBuffers === 'server') {
    await ensurePostgres();
  } else {
    ownServer = await startOwnPostgres({ shared_buffers: settings.sharedBuffers }, { hugePages: settings.hugePages });
    useAdminUrl(ownServer.adminUrl);
    const { used, needed, free } = ownServer.hugePages;
    log(`PostgreSQL server of this run on ${ownServer.adminUrl}, shared_buffers ${settings.sharedBuffers} (${ownServer.dir})`);
    if (used) log(`its shared memory is on ${needed ?? 'some'} huge pages`);
    else if (settings.hugePages === 'auto' && needed !== null && needed > 0) {
      log(`its shared memory is on 4 kB pages: the system has ${free} huge pages free of the ${needed} it needs; as root, sysctl -w vm.nr_hugepages=${needed} reserves them (docs/performance.md, "At a million users")`);
    }
  }
  const startedAt = new Date();
  const keyFile = writeSigningKey(tmp);
  const dataDir = path.join(tmp, 'data');
  const urls = { large: await createDatabase(names.large), small: await createDatabase(names.small) };
  log(`databases ${names.large} (${settings.users} users) and ${names.small} (${settings.smallUsers}); temporary files in ${tmp}`);
  // One DATA_DIR for every process: the same generated second-factor key everywhere.
  const envOf = (url, extra = {}) => serviceEnv({ DATABASE_URL: url, JWT_PRIVATE_KEY_FILE: keyFile, DATA_DIR: dataDir, ...extra });

  // Migrations (first start of each), and the real rows the seed copies.
  const first = track(await startService({ env: envOf(urls.large), logFile: path.join(logDir, 'large-first.log') }));
  const templates = await makeTemplates(apiClient(first.url), urls.large);
  await first.stop();
  await (track(await startService({ env: envOf(urls.small), logFile: path.join(logDir, 'small-first.log') }))).stop();
  const config = loadConfig(envOf(urls.large));
  const keys = await loadKeyStore({ privateKeyFile: config.jwt.privateKeyFile, publicKeyFiles: config.jwt.publicKeyFiles, dataDir: config.dataDir, codeHmacKeyFile: config.codeHmacKeyFile, mfaKeyFile: config.mfaKeyFile });

  log(`seeding ${names.small}`);
  const seedingSmall = await seed(urls.small, settings.smallUsers, templates, keys);
  log(`seeding ${names.large}`);
  const seedingLarge = await seed(urls.large, settings.users, templates, keys);
  log(`seeded ${settings.users} users in ${seedingLarge.totalSeconds.toFixed(0)} s, ${settings.smallUsers} in ${seedingSmall.totalSeconds.toFixed(1)} s`);

  log('plans of the measured routes\' statements (stdout)');
  const statements = await capturePlans({ env: envOf(urls.large), dbUrl: urls.large, n: settings.users, templates });
  const failures = reportPlans(statements, await tableRows(urls.large));
  // The same flows on the small database, for the per-statement comparison (buffers, WAL, time).
  const smallStatements = new Map((await capturePlans({ env: envOf(urls.small), dbUrl: urls.small, n: settings.smallUsers, templates })).map((st) => [st.sql, st]));
  for (const st of statements) {
    const other = smallStatements.get(st.sql);
    st.small = other?.custom === undefined ? undefined : planSummary(other.custom);
  }
  log(`${statements.length} statements explained; ${failures.length} with a sequential scan of a large table`);
  // The seeding wrote gigabytes of WAL: without this, the checkpoints it set off one after the
  // other (each writing a tenth of shared_buffers, the last spread over minutes) would still run
  // through the first scenarios. The measurement starts with a checkpoint cycle of its own.
  const checkpointStarted = performance.now();
  await withClient(ADMIN_URL, (c) => c.query('CHECKPOINT'));
  log(`CHECKPOINT in ${((performance.now() - checkpointStarted) / 1000).toFixed(1)} s`);

  const large = track(await startService({ env: envOf(urls.large), logFile: path.join(logDir, 'large.log') }));
  const small = track(await startService({ env: envOf(urls.small), logFile: path.join(logDir, 'small.log') }));
  const sides = [
    { name: 'large', database: names.large, service: large, api: apiClient(large.url) },
    { name: 'small', database: names.small, service: small, api: apiClient(small.url) },
  ];
  for (const side of sides) side.data = await prepareData(side.api, side.name === 'large' ? settings.users : settings.smallUsers, settings.sample, templates.privateKeys);
  const quiet = await waitForQuiet({ maxLoad: settings.maxLoad, timeoutSeconds: settings.quietTimeoutSeconds, pollSeconds: 15 });
  log(`measuring (1-min load ${quiet.after.one})`);
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const results = [];
  for (const scenario of scaleScenarios()) {
    // A short wait before each scenario too: other work on the machine comes and goes.
    await waitForQuiet({ maxLoad: settings.maxLoad, timeoutSeconds: SCENARIO_QUIET_SECONDS, pollSeconds: 10 });
    for (const connections of settings.connections) results.push(await measureSides(scenario, connections, sides, admin));
  }

  let poolModes = null;
  if (settings.poolModes) {
    const transaction = track(await startService({ env: envOf(urls.large, { DATABASE_POOL_MODE: 'transaction' }), logFile: path.join(logDir, 'large-transaction.log') }));
    const modeSides = [
      { name: 'session', database: names.large, service: large, api: sides[0].api, data: sides[0].data },
      { name: 'transaction', database: names.large, service: transaction, api: apiClient(transaction.url), data: sides[0].data },
    ];
    poolModes = [];
    for (const scenario of scaleScenarios().filter((sc) => sc.name === 'me' || sc.name === 'refresh')) poolModes.push(await measureSides(scenario, settings.connections[0], modeSides, admin, { blocks: false }));
    await transaction.stop();
  }
  await Promise.all([large.stop(), small.stop()]);
  await admin.end();

  const { rows: shared } = await withClient(urls.large, (c) => c.query('SHOW shared_buffers'));
  const report = {
    generatedAt: new Date().toISOString(),
    startedAt: startedAt.toISOString(),
    revision: gitRevision(),
    machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? null, memoryGiB: Math.round(os.totalmem() / 2 ** 30), node: process.version, postgres: await postgresVersion(), sharedBuffers: shared[0].shared_buffers, ownServer: ownServer !== null, hugePages: ownServer?.hugePages.used ?? null },
    settings,
    quiet,
    seeding: { large: seedingLarge, small: seedingSmall },
    sampled: { large: sides[0].data.sampled, small: sides[1].data.sampled },
    results,
    poolModes,
    plans: { statements, failures: failures.map((f) => ({ caller: f.caller, largeSeqScans: f.largeSeqScans })) },
  };
  const section = renderScale(report);
  if (settings.write) {
    writeFileSync(path.join(ROOT, 'docs/performance-scale.json'), `${JSON.stringify(report, null, 2)}\n`);
    writeDocs(path.join(ROOT, 'docs/performance.md'), section, { begin: BEGIN, end: END });
    log('wrote docs/performance-scale.json and the "At a million users" results in docs/performance.md');
  } else {
    process.stdout.write(`\n${section}`);
  }
  const missed = results.filter((r) => !(r.throughputRatio >= THROUGHPUT_TARGET && r.p99Ratio <= P99_TARGET));
  if (missed.length > 0) log(`targets missed: ${missed.map((r) => `${r.scenario} (ratio ${fmt(r.throughputRatio, 2)}, p99 ×${fmt(r.p99Ratio, 2)})`).join(', ')}`);
  if (failures.length > 0) {
    log(`FAILED: sequential scan of a large table in ${failures.map((f) => `${f.caller} (${f.largeSeqScans.join(', ')})`).join('; ')}`);
    process.exitCode = 1;
  }
}

function gitRevision() {
  try {
    const run = (args) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
    return `${run(['rev-parse', '--short', 'HEAD'])}${run(['status', '--porcelain']) === '' ? '' : ' (with uncommitted changes)'}`;
  } catch {
    return null;
  }
}

try {
  await main();
} finally {
  await cleanup();
}
