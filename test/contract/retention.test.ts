import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { createLogger } from '../../src/app.js';
import type { RetentionSettings } from '../../src/config.js';
import { claimDueEmails, countOutboxBacklog, cancelExpiredEmails, oldestPendingEmailCreatedAt, releaseLeases, type OutboxStatus } from '../../src/modules/mail/outbox.repo.js';
import { purgeWindows } from '../../src/modules/rate-limits/rate-limits.repo.js';
import { purgeInBatches } from '../../src/db/batches.js';
import { eraseExpiredSuccessors, purgeDeadEmails, purgeEndedSessions, purgeEndedVerificationCodes, purgeFinishedEmails } from '../../src/modules/retention/retention.repo.js';
import { createRetentionWorker, type RetentionWorkerDeps } from '../../src/modules/retention/retention.worker.js';
import { TestClock } from '../helpers/clock.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { seqScans as seqScanTables, statementsOf, type Statement } from '../helpers/plans.js';

/**
 * The retention worker (docs/operations.md, "Retention") on a real database: each purge deletes
 * what ended longer ago than its period and keeps everything else, in bounded batches.
 */

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database.drop());

const T0 = new Date('2026-03-01T00:00:00Z');
const DAY_MS = 24 * 60 * 60 * 1000;
const daysAgo = (days: number): Date => new Date(T0.getTime() - days * DAY_MS);
const secondsAgo = (seconds: number): Date => new Date(T0.getTime() - seconds * 1000);

/** The retention periods of these tests: the documented defaults. */
const RETENTION: RetentionSettings = { sessionsDays: 30, verificationCodesDays: 7, outboxDays: 7, outboxDeadDays: 30, webhookDays: 7, webhookDeadDays: 30, adminAuditDays: 365 };
/** The refresh grace window of these tests, in seconds. */
const GRACE = 10;

function worker(batches: RetentionWorkerDeps['batches'] = { pauseMs: 0 }) {
  return createRetentionWorker({
    db: database.db,
    clock: new TestClock(T0),
    log: createLogger('silent'),
    retention: RETENTION,
    refreshReuseGraceSeconds: GRACE,
    batches,
  });
}

async function insertUser(): Promise<string> {
  const id = randomUUID();
  const name = `u_${id.replaceAll('-', '').slice(0, 20)}`;
  await database.db.query('INSERT INTO users (id, username, email, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)', [
    id,
    name,
    `${name}@example.test`,
    'not-a-hash',
    daysAgo(400),
  ]);
  return id;
}

/** A session with its device (or `deviceId`'s) and a chain of `tokens` refresh tokens (all but the last rotated). */
async function insertSession(s: { userId: string; expiresAt: Date; revokedAt?: Date | null; tokens?: number; deviceId?: string }): Promise<{ id: string; deviceId: string; tokenIds: string[] }> {
  const id = randomUUID();
  const deviceId = s.deviceId ?? randomUUID();
  if (s.deviceId === undefined) {
    await database.db.query('INSERT INTO devices (id, user_id, created_at) VALUES ($1, $2, $3)', [deviceId, s.userId, daysAgo(400)]);
  }
  await database.db.query(
    `INSERT INTO sessions (id, user_id, device_id, created_at, expires_at, revoked_at, revoked_reason) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [id, s.userId, deviceId, daysAgo(400), s.expiresAt, s.revokedAt ?? null, s.revokedAt == null ? null : 'logout'],
  );
  const tokenIds: string[] = [];
  const count = s.tokens ?? 2;
  for (let i = 0; i < count; i++) {
    const tokenId = randomUUID();
    const rotatedAt = i < count - 1 ? daysAgo(300 - i) : null;
    await database.db.query('INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at, rotated_at) VALUES ($1, $2, $3, $4, $5, $6)', [
      tokenId,
      id,
      randomUUID(),
      tokenIds.at(-1) ?? null,
      daysAgo(400),
      rotatedAt,
    ]);
    tokenIds.push(tokenId);
  }
  return { id, deviceId, tokenIds };
}

async function exists(table: string, id: string): Promise<boolean> {
  const { rows } = await database.db.query(`SELECT 1 FROM ${table} WHERE id = $1`, [id]);
  return rows.length === 1;
}

async function insertCode(c: { userId: string; expiresAt: Date; consumedAt?: Date; supersededAt?: Date }): Promise<string> {
  const id = randomUUID();
  await database.db.query(
    `INSERT INTO verification_codes (id, user_id, email, code_hash, created_at, expires_at, consumed_at, superseded_at) VALUES ($1, $2, 'x@example.test', 'hmac', $3, $4, $5, $6)`,
    [id, c.userId, new Date(c.expiresAt.getTime() - 15 * 60 * 1000), c.expiresAt, c.consumedAt ?? null, c.supersededAt ?? null],
  );
  return id;
}

async function insertEmail(e: { status: OutboxStatus; createdAt: Date; code?: boolean; nextAttemptAt?: Date; expiresAt?: Date }): Promise<string> {
  const id = randomUUID();
  await database.db.query(
    `INSERT INTO email_outbox (id, kind, recipient, payload, status, attempts, created_at, next_attempt_at, sent_at, expires_at)
     VALUES ($1, 'verification', 'r@example.test', $2, $3, 1, $4, $5, $6, $7)`,
    [
      id,
      JSON.stringify(e.code === true ? { username: 'r', code: '123456' } : { username: 'r' }),
      e.status,
      e.createdAt,
      e.nextAttemptAt ?? e.createdAt,
      e.status === 'sent' ? e.createdAt : null,
      e.expiresAt ?? new Date(e.createdAt.getTime() + 15 * 60 * 1000),
    ],
  );
  return id;
}

describe('sessions, their refresh tokens and devices', () => {
  it('deletes sessions ended (expired or revoked) over RETENTION_SESSIONS_DAYS ago with their tokens and devices; keeps live and recently ended ones', async () => {
    const userId = await insertUser();
    const live = await insertSession({ userId, expiresAt: daysAgo(-10), tokens: 3 });
    const expiredLongAgo = await insertSession({ userId, expiresAt: daysAgo(31), tokens: 3 });
    const revokedLongAgo = await insertSession({ userId, expiresAt: daysAgo(-300), revokedAt: daysAgo(31) });
    const revokedRecently = await insertSession({ userId, expiresAt: daysAgo(-300), revokedAt: daysAgo(29) });
    const expiredRecently = await insertSession({ userId, expiresAt: daysAgo(29) });
    // Revoked long ago, after it had expired long ago as well: the earlier of the two counts.
    const revokedAfterExpiry = await insertSession({ userId, expiresAt: daysAgo(45), revokedAt: daysAgo(1) });

    const report = await worker().runOnce();
    expect(report.complete).toBe(true);

    for (const gone of [expiredLongAgo, revokedLongAgo, revokedAfterExpiry]) {
      expect(await exists('sessions', gone.id)).toBe(false);
      expect(await exists('devices', gone.deviceId)).toBe(false);
      for (const tokenId of gone.tokenIds) expect(await exists('refresh_tokens', tokenId)).toBe(false);
    }
    for (const kept of [live, revokedRecently, expiredRecently]) {
      expect(await exists('sessions', kept.id)).toBe(true);
      expect(await exists('devices', kept.deviceId)).toBe(true);
      for (const tokenId of kept.tokenIds) expect(await exists('refresh_tokens', tokenId)).toBe(true);
    }
    expect(report.sessions).toBeGreaterThanOrEqual(3);
    expect(report.devices).toBeGreaterThanOrEqual(3);
  });

  it('keeps a device that a remaining session still refers to', async () => {
    const userId = await insertUser();
    const live = await insertSession({ userId, expiresAt: daysAgo(-10) });
    const ended = await insertSession({ userId, expiresAt: daysAgo(40), deviceId: live.deviceId });
    await worker().runOnce();
    expect(await exists('sessions', ended.id)).toBe(false);
    expect(await exists('sessions', live.id)).toBe(true);
    expect(await exists('devices', live.deviceId)).toBe(true);
    const { rows } = await database.db.query<{ device_id: string }>('SELECT device_id FROM sessions WHERE id = $1', [live.id]);
    expect(rows[0]!.device_id).toBe(live.deviceId);
  });

  it('works in batches: more ended sessions than a batch are all deleted, at most the cap per run and the rest at the next run', async () => {
    await worker().runOnce(); // nothing of the earlier tests left to purge
    const userId = await insertUser();
    const ended = await Promise.all(Array.from({ length: 10 }, () => insertSession({ userId, expiresAt: daysAgo(60), tokens: 3 })));
    const capped = worker({ sessionBatchSize: 3, maxBatches: 2, pauseMs: 0 });
    const first = await capped.runOnce();
    expect(first).toMatchObject({ sessions: 6, devices: 6, complete: false });
    const second = await capped.runOnce();
    expect(second).toMatchObject({ sessions: 4, devices: 4, complete: true });
    for (const s of ended) expect(await exists('sessions', s.id)).toBe(false);
    const { rows } = await database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM refresh_tokens WHERE session_id = ANY($1::uuid[])', [ended.map((s) => s.id)]);
    expect(rows[0]!.n).toBe(0);
  });

  // PGlite has one connection: a second statement cannot run while a transaction holds a row.
  it.runIf(process.env.TEST_DB === 'postgres')('skips a session whose token a request holds (no deadlock with a refresh), and deletes it once released', async () => {
    const userId = await insertUser();
    const ended = await insertSession({ userId, expiresAt: daysAgo(60), tokens: 2 });
    await database.db.transaction(async (tx) => {
      await tx.query('SELECT id FROM refresh_tokens WHERE id = $1 FOR UPDATE', [ended.tokenIds[1]]);
      const purged = await purgeEndedSessions(database.db, daysAgo(30), 100);
      expect(purged.sessions).toBe(0);
    });
    expect(await exists('sessions', ended.id)).toBe(true);
    await database.db.transaction(async (tx) => {
      await tx.query('SELECT id FROM sessions WHERE id = $1 FOR UPDATE', [ended.id]);
      expect((await purgeEndedSessions(database.db, daysAgo(30), 100)).sessions).toBe(0);
    });
    expect((await purgeEndedSessions(database.db, daysAgo(30), 100)).sessions).toBe(1);
    expect(await exists('sessions', ended.id)).toBe(false);
  });
});

describe('verification codes', () => {
  it('deletes codes consumed, superseded or expired over RETENTION_VERIFICATION_CODES_DAYS ago; keeps live and recently ended ones', async () => {
    const userId = await insertUser();
    const consumedLongAgo = await insertCode({ userId, expiresAt: daysAgo(7.9), consumedAt: daysAgo(8) });
    const supersededLongAgo = await insertCode({ userId, expiresAt: daysAgo(7.9), supersededAt: daysAgo(8) });
    const expiredLongAgo = await insertCode({ userId, expiresAt: daysAgo(8) });
    const consumedRecently = await insertCode({ userId, expiresAt: daysAgo(5.9), consumedAt: daysAgo(6) });
    const expiredRecently = await insertCode({ userId, expiresAt: daysAgo(6) });
    const live = await insertCode({ userId, expiresAt: secondsAgo(-600) });

    const report = await worker().runOnce();
    expect(report.verificationCodes).toBeGreaterThanOrEqual(3);
    for (const gone of [consumedLongAgo, supersededLongAgo, expiredLongAgo]) expect(await exists('verification_codes', gone)).toBe(false);
    for (const kept of [consumedRecently, expiredRecently, live]) expect(await exists('verification_codes', kept)).toBe(true);
  });

  it('works in batches', async () => {
    await worker().runOnce();
    const userId = await insertUser();
    const ids = await Promise.all(Array.from({ length: 7 }, () => insertCode({ userId, expiresAt: daysAgo(9) })));
    let statements = 0;
    const outcome = await purgeInBatches(
      (limit) => {
        statements++;
        return purgeEndedVerificationCodes(database.db, daysAgo(7), limit);
      },
      { batchSize: 2, maxBatches: 100, pauseMs: 0 },
    );
    expect(outcome).toEqual({ rows: 7, batches: 4, complete: true });
    expect(statements).toBe(4);
    for (const id of ids) expect(await exists('verification_codes', id)).toBe(false);
  });
});

describe('email outbox', () => {
  it('deletes sent, suppressed and cancelled rows after RETENTION_OUTBOX_DAYS and dead rows after RETENTION_OUTBOX_DEAD_DAYS; never pending rows', async () => {
    const sentLongAgo = await insertEmail({ status: 'sent', createdAt: daysAgo(8) });
    const suppressedLongAgo = await insertEmail({ status: 'suppressed', createdAt: daysAgo(8) });
    const suppressedRecently = await insertEmail({ status: 'suppressed', createdAt: daysAgo(6) });
    const cancelledLongAgo = await insertEmail({ status: 'cancelled', createdAt: daysAgo(8) });
    const sentRecently = await insertEmail({ status: 'sent', createdAt: daysAgo(6) });
    const cancelledRecently = await insertEmail({ status: 'cancelled', createdAt: daysAgo(6) });
    const deadWithinLimit = await insertEmail({ status: 'dead', createdAt: daysAgo(29) });
    const deadLongAgo = await insertEmail({ status: 'dead', createdAt: daysAgo(31) });
    // A pending row is the worker's, however old (an operator retried it): never purged.
    const pendingOld = await insertEmail({ status: 'pending', createdAt: daysAgo(40), nextAttemptAt: secondsAgo(-60) });

    const report = await worker().runOnce();
    expect(report.finishedEmails).toBeGreaterThanOrEqual(3);
    expect(report.deadEmails).toBeGreaterThanOrEqual(1);
    for (const gone of [sentLongAgo, suppressedLongAgo, cancelledLongAgo, deadLongAgo]) expect(await exists('email_outbox', gone)).toBe(false);
    for (const kept of [sentRecently, suppressedRecently, cancelledRecently, deadWithinLimit, pendingOld]) expect(await exists('email_outbox', kept)).toBe(true);
  });

  it('works in batches, for finished and for dead rows', async () => {
    await worker().runOnce();
    const finished = await Promise.all(Array.from({ length: 5 }, (_, i) => insertEmail({ status: i % 2 === 0 ? 'sent' : 'cancelled', createdAt: daysAgo(10) })));
    const dead = await Promise.all(Array.from({ length: 5 }, () => insertEmail({ status: 'dead', createdAt: daysAgo(40) })));
    expect(await purgeInBatches((limit) => purgeFinishedEmails(database.db, daysAgo(7), limit), { batchSize: 2, maxBatches: 100, pauseMs: 0 })).toEqual({
      rows: 5,
      batches: 3,
      complete: true,
    });
    expect(await purgeInBatches((limit) => purgeDeadEmails(database.db, daysAgo(30), limit), { batchSize: 2, maxBatches: 100, pauseMs: 0 })).toEqual({
      rows: 5,
      batches: 3,
      complete: true,
    });
    for (const id of [...finished, ...dead]) expect(await exists('email_outbox', id)).toBe(false);
  });

  it('the metrics backlog counts pending and dead rows only', async () => {
    const before = await countOutboxBacklog(database.db);
    await insertEmail({ status: 'pending', createdAt: T0, nextAttemptAt: secondsAgo(-3600) });
    await insertEmail({ status: 'dead', createdAt: T0 });
    await insertEmail({ status: 'sent', createdAt: T0 });
    await insertEmail({ status: 'cancelled', createdAt: T0 });
    expect(await countOutboxBacklog(database.db)).toEqual({ pending: before.pending + 1, dead: before.dead + 1 });
  });
});

describe('sealed successors of the refresh grace window', () => {
  /**
   * A token rotated `seconds` ago with a (fake) sealed successor, sealed then: the first token
   * of a session of its own (one token without a parent per session, migration 019).
   */
  async function sealed(userId: string, seconds: number): Promise<string> {
    const { id: sessionId } = await insertSession({ userId, expiresAt: daysAgo(-10), tokens: 0 });
    const id = randomUUID();
    await database.db.query(
      `INSERT INTO refresh_tokens (id, session_id, token_hash, created_at, rotated_at, successor_ciphertext, sealed_at) VALUES ($1, $2, $3, $4, $4, 'sealed', $4)`,
      [id, sessionId, randomUUID(), secondsAgo(seconds)],
    );
    return id;
  }
  async function ciphertextOf(id: string): Promise<string | null> {
    const { rows } = await database.db.query<{ successor_ciphertext: string | null }>('SELECT successor_ciphertext FROM refresh_tokens WHERE id = $1', [id]);
    return rows[0]!.successor_ciphertext;
  }

  it('erases the seals of rotations older than the grace window, in batches, and keeps those within it', async () => {
    const userId = await insertUser();
    const outside = await Promise.all([GRACE + 1, GRACE + 60, 3600, 86_400, 2 * 86_400].map((s) => sealed(userId, s)));
    const inside = await Promise.all([GRACE, GRACE - 1, 0].map((s) => sealed(userId, s)));
    const small = worker({ batchSize: 2, pauseMs: 0 });
    expect(await small.eraseSealedSuccessors()).toBe(5);
    for (const id of outside) expect(await ciphertextOf(id)).toBeNull();
    for (const id of inside) expect(await ciphertextOf(id)).toBe('sealed');
    const { rows } = await database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM refresh_tokens WHERE successor_ciphertext IS NOT NULL AND rotated_at < $1', [secondsAgo(GRACE)]);
    expect(rows[0]!.n).toBe(0);
  });

  it('erases in bounded statements: with a batch of 2, five seals take three statements', async () => {
    const userId = await insertUser();
    await Promise.all(Array.from({ length: 5 }, (_, i) => sealed(userId, GRACE + 1 + i)));
    expect(await purgeInBatches((limit) => eraseExpiredSuccessors(database.db, secondsAgo(GRACE), limit), { batchSize: 2, maxBatches: 100, pauseMs: 0 })).toEqual({
      rows: 5,
      batches: 3,
      complete: true,
    });
  });
});

describe('several instances', () => {
  it('two workers purging one database at once delete every ended row exactly once, without an error', async () => {
    await worker().runOnce();
    const userId = await insertUser();
    const sessions = await Promise.all(Array.from({ length: 30 }, () => insertSession({ userId, expiresAt: daysAgo(60), tokens: 2 })));
    const codes = await Promise.all(Array.from({ length: 30 }, () => insertCode({ userId, expiresAt: daysAgo(9) })));
    const emails = await Promise.all(Array.from({ length: 30 }, () => insertEmail({ status: 'sent', createdAt: daysAgo(10) })));
    const small = { batchSize: 4, sessionBatchSize: 4, pauseMs: 0 };
    const reports = await Promise.all([worker(small).runOnce(), worker(small).runOnce()]);
    const sum = (key: 'sessions' | 'devices' | 'verificationCodes' | 'finishedEmails') => reports.reduce((n, r) => n + r[key], 0);
    expect([sum('sessions'), sum('devices'), sum('verificationCodes'), sum('finishedEmails')]).toEqual([30, 30, 30, 30]);
    for (const s of sessions) expect(await exists('sessions', s.id)).toBe(false);
    for (const id of codes) expect(await exists('verification_codes', id)).toBe(false);
    for (const id of emails) expect(await exists('email_outbox', id)).toBe(false);
  });
});

describe('rate-limit windows', () => {
  it('the purge of ended windows works in batches', async () => {
    await purgeWindows(database.db, T0, 1_000_000);
    for (let i = 0; i < 5; i++) {
      await database.db.query('INSERT INTO rate_limits (key, window_start, hits) VALUES ($1, $2, 1)', [`retention:${i}`, daysAgo(2)]);
    }
    await database.db.query('INSERT INTO rate_limits (key, window_start, hits) VALUES ($1, $2, 1)', ['retention:current', T0]);
    expect(await purgeInBatches((limit) => purgeWindows(database.db, daysAgo(1), limit), { batchSize: 2, maxBatches: 100, pauseMs: 0 })).toEqual({
      rows: 5,
      batches: 3,
      complete: true,
    });
    const { rows } = await database.db.query<{ key: string }>(`SELECT key FROM rate_limits WHERE key LIKE 'retention:%'`);
    expect(rows.map((r) => r.key)).toEqual(['retention:current']);
  });
});

/** Tables a statement's plan reads with a sequential scan, on this file's database. */
const seqScans = (statement: Statement): Promise<string[]> => seqScanTables(database.db, statement);

// The planner chooses by table statistics: only a PostgreSQL table of many rows shows whether
// an index serves a statement (a table of a few rows is read whole, index or not).
describe.runIf(process.env.TEST_DB === 'postgres')('no per-second or per-scrape statement reads a whole table (PostgreSQL, 200 000 rows)', () => {
  const ROWS = 200_000;
  beforeAll(async () => {
    // Seeding 200,000 rows on a busy machine can take longer than the service pool's statement
    // and answer timeouts (src/db/pg.ts), which are for requests: a connection of its own.
    const userId = await insertUser();
    const tx = new pg.Client({ connectionString: database.url });
    await tx.connect();
    try {
      await tx.query(
        `INSERT INTO email_outbox (id, kind, recipient, payload, status, attempts, created_at, next_attempt_at, sent_at, expires_at)
         SELECT gen_random_uuid(), 'verification', 'r' || i || '@example.test', '{"username":"r"}'::jsonb,
                CASE WHEN i % 1000 = 0 THEN 'dead' WHEN i % 100 = 0 THEN 'cancelled' ELSE 'sent' END, 1,
                $1::timestamptz - make_interval(secs => i), $1::timestamptz - make_interval(secs => i), $1::timestamptz - make_interval(secs => i),
                $1::timestamptz - make_interval(secs => i) + interval '15 minutes'
           FROM generate_series(1, $2::int) AS i`,
        [T0, ROWS],
      );
      await tx.query(
        `WITH d AS (INSERT INTO devices (id, user_id, created_at) SELECT gen_random_uuid(), $1, $2 FROM generate_series(1, $3::int) RETURNING id),
              s AS (INSERT INTO sessions (id, user_id, device_id, created_at, expires_at)
                    SELECT gen_random_uuid(), $1, d.id, $2, $2::timestamptz + interval '30 days' FROM d RETURNING id)
         INSERT INTO refresh_tokens (id, session_id, token_hash, created_at) SELECT gen_random_uuid(), s.id, md5(s.id::text), $2 FROM s`,
        [userId, T0, ROWS / 4],
      );
      await tx.query(
        `INSERT INTO verification_codes (id, user_id, email, code_hash, created_at, expires_at, consumed_at)
         SELECT gen_random_uuid(), $1, 'x@example.test', md5(i::text), $2::timestamptz - make_interval(secs => i), $2::timestamptz - make_interval(secs => i) + interval '15 minutes',
                $2::timestamptz - make_interval(secs => i) + interval '1 minute'
           FROM generate_series(1, $3::int) AS i`,
        [userId, T0, ROWS / 4],
      );
      await tx.query(
        `INSERT INTO rate_limits (key, window_start, hits) SELECT 'explain:' || i, $1::timestamptz - make_interval(secs => i), 1 FROM generate_series(1, $2::int) AS i`,
        [T0, ROWS / 4],
      );
      await tx.query('ANALYZE');
    } finally {
      await tx.end();
    }
  }, 120_000);

  it('the outbox worker round: cancelling expired rows, dropping expired codes, claiming due rows, releasing leases', async () => {
    const statements = [
      ...(await statementsOf((q) => cancelExpiredEmails(q, T0))),
      ...(await statementsOf((q) => claimDueEmails(q, { owner: 'w', now: T0, leaseUntil: T0, limit: 10 }))),
      ...(await statementsOf((q) => releaseLeases(q, 'w'))),
    ];
    expect(statements.length).toBe(4);
    for (const s of statements) expect(await seqScans(s), s.sql).toEqual([]);
  });

  it('the /metrics scrape: the backlog counts and the oldest pending row', async () => {
    const statements = [...(await statementsOf((q) => countOutboxBacklog(q))), ...(await statementsOf((q) => oldestPendingEmailCreatedAt(q)))];
    for (const s of statements) expect(await seqScans(s), s.sql).toEqual([]);
  });

  it('every purge statement', async () => {
    const statements = [
      ...(await statementsOf((q) => purgeEndedSessions(q, daysAgo(30), 250))),
      ...(await statementsOf((q) => purgeEndedVerificationCodes(q, daysAgo(7), 1000))),
      ...(await statementsOf((q) => purgeFinishedEmails(q, daysAgo(7), 1000))),
      ...(await statementsOf((q) => purgeDeadEmails(q, daysAgo(30), 1000))),
      ...(await statementsOf((q) => eraseExpiredSuccessors(q, secondsAgo(GRACE), 1000))),
      ...(await statementsOf((q) => purgeWindows(q, daysAgo(1), 1000))),
    ];
    for (const s of statements) expect(await seqScans(s), s.sql).toEqual([]);
  });
});
