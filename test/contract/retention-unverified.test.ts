import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/app.js';
import type { RetentionSettings } from '../../src/config.js';
import { createAuthMetrics } from '../../src/metrics.js';
import { deleteExpiredUnverifiedUsers } from '../../src/modules/accounts/accounts.repo.js';
import { purgeInBatches } from '../../src/db/batches.js';
import { createRetentionWorker, EXPIRED_UNVERIFIED_REASON, type RetentionWorkerDeps } from '../../src/modules/retention/retention.worker.js';
import { TestClock } from '../helpers/clock.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * Unverified accounts expire (docs/api.md#unverified-accounts-expire): the retention worker
 * deletes users whose email was never verified UNVERIFIED_ACCOUNT_TTL_SECONDS after sign-up,
 * in bounded batches, and never a verified user or a user without email.
 */

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database.drop());

const T0 = new Date('2026-03-01T00:00:00Z');
const TTL = 604_800;
const secondsAgo = (seconds: number): Date => new Date(T0.getTime() - seconds * 1000);
const RETENTION: RetentionSettings = { sessionsDays: 30, verificationCodesDays: 7, outboxDays: 7, outboxDeadDays: 30, webhookDays: 7, webhookDeadDays: 30, adminAuditDays: 365 };

function worker(extra: Partial<RetentionWorkerDeps> = {}) {
  return createRetentionWorker({
    db: database.db,
    clock: new TestClock(T0),
    log: createLogger('silent'),
    retention: RETENTION,
    refreshReuseGraceSeconds: 0,
    unverifiedAccountTtlSeconds: TTL,
    batches: { pauseMs: 0 },
    ...extra,
  });
}

/** Inserts a user created at `createdAt`; with an email unless `phoneOnly`. */
async function insertUser(u: { createdAt: Date; verified?: boolean; phoneOnly?: boolean }): Promise<string> {
  const id = randomUUID();
  const name = `u_${id.replaceAll('-', '').slice(0, 20)}`;
  const phone = `+1${String(Math.floor(Math.random() * 1e10)).padStart(10, '0')}`;
  await database.db.query(
    `INSERT INTO users (id, username, email, phone, password_hash, is_email_verified, created_at, updated_at) VALUES ($1, $2, $3, $4, 'not-a-hash', $5, $6, $6)`,
    [id, name, u.phoneOnly === true ? null : `${name}@example.test`, u.phoneOnly === true ? phone : null, u.verified ?? false, u.createdAt],
  );
  return id;
}

async function insertCode(userId: string): Promise<string> {
  const id = randomUUID();
  await database.db.query(
    `INSERT INTO verification_codes (id, user_id, email, code_hash, created_at, expires_at) SELECT $1, id, email, 'h', created_at, created_at + interval '15 minutes' FROM users WHERE id = $2`,
    [id, userId],
  );
  return id;
}

async function exists(table: string, id: string): Promise<boolean> {
  const { rows } = await database.db.query(`SELECT 1 FROM ${table} WHERE id = $1`, [id]);
  return rows.length === 1;
}

describe('unverified accounts expire', () => {
  it('deletes users whose email was never verified over UNVERIFIED_ACCOUNT_TTL_SECONDS ago, with their codes; keeps younger ones, verified ones and users without email', async () => {
    const expired = await insertUser({ createdAt: secondsAgo(TTL + 1) });
    const expiredCode = await insertCode(expired);
    const young = await insertUser({ createdAt: secondsAgo(TTL - 1) });
    const verifiedOld = await insertUser({ createdAt: secondsAgo(TTL * 10), verified: true });
    const phoneOnlyOld = await insertUser({ createdAt: secondsAgo(TTL * 10), phoneOnly: true });
    const metrics = createAuthMetrics();

    const report = await worker({ metrics }).runOnce();
    expect(report).toMatchObject({ unverifiedUsers: 1, complete: true });
    expect(await exists('users', expired)).toBe(false);
    expect(await exists('verification_codes', expiredCode)).toBe(false);
    for (const kept of [young, verifiedOld, phoneOnlyOld]) expect(await exists('users', kept)).toBe(true);
    expect(await metrics.registry.getSingleMetricAsString('auth_accounts_deleted_total')).toContain('auth_accounts_deleted_total{cause="unverified_expired"} 1');

    // Exactly at the TTL it is not yet expired (strictly before the cutoff goes).
    const atCutoff = await insertUser({ createdAt: secondsAgo(TTL) });
    expect((await worker().runOnce()).unverifiedUsers).toBe(0);
    expect(await exists('users', atCutoff)).toBe(true);
    await database.db.query('DELETE FROM users WHERE id = $1', [atCutoff]);
  });

  it('cancels, in the same transaction, the emails still queued to the deleted users\' addresses (a code, a password-reset request); keeps those to kept users', async () => {
    const expired = await insertUser({ createdAt: secondsAgo(TTL + 1) });
    const young = await insertUser({ createdAt: secondsAgo(TTL - 1) });
    const emailOf = async (id: string) => (await database.db.query<{ email: string }>('SELECT email FROM users WHERE id = $1', [id])).rows[0]!.email;
    const expiredEmail = await emailOf(expired);
    const youngEmail = await emailOf(young);
    // Queued near the deadline: neither has expired yet.
    const queue = async (kind: string, recipient: string, payload: object) =>
      database.db.query(
        `INSERT INTO email_outbox (id, kind, recipient, payload, created_at, next_attempt_at, expires_at) VALUES ($1, $2, $3, $4, $5, $5, $6)`,
        [randomUUID(), kind, recipient, JSON.stringify(payload), secondsAgo(60), new Date(T0.getTime() + 600_000)],
      );
    await queue('verification', expiredEmail, { code: '123456', username: 'x' });
    await queue('password_reset_request', expiredEmail, {});
    await queue('verification', youngEmail, { code: '654321', username: 'y' });

    expect((await worker().runOnce()).unverifiedUsers).toBe(1);
    expect(await exists('users', expired)).toBe(false);
    const rowsTo = async (to: string) =>
      (await database.db.query<{ status: string; last_error: string | null; has_code: boolean }>(
        `SELECT status, last_error, payload ? 'code' AS has_code FROM email_outbox WHERE recipient = $1 ORDER BY kind`, [to])).rows;
    expect(await rowsTo(expiredEmail)).toEqual([
      { status: 'cancelled', last_error: EXPIRED_UNVERIFIED_REASON, has_code: false },
      { status: 'cancelled', last_error: EXPIRED_UNVERIFIED_REASON, has_code: false },
    ]);
    expect(await rowsTo(youngEmail)).toEqual([{ status: 'pending', last_error: null, has_code: true }]);
    await database.db.query('DELETE FROM email_outbox WHERE recipient = ANY($1::text[])', [[expiredEmail, youngEmail]]);
    await database.db.query('DELETE FROM users WHERE id = $1', [young]);
  });

  it('without the setting (undefined) deletes no user', async () => {
    const expired = await insertUser({ createdAt: secondsAgo(TTL * 2) });
    expect((await worker({ unverifiedAccountTtlSeconds: undefined }).runOnce()).unverifiedUsers).toBe(0);
    expect(await exists('users', expired)).toBe(true);
    await database.db.query('DELETE FROM users WHERE id = $1', [expired]);
  });

  it('works in bounded batches, oldest first', async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await insertUser({ createdAt: secondsAgo(TTL + 100 - i) }));
    const first = await deleteExpiredUnverifiedUsers(database.db, { createdBefore: secondsAgo(TTL), limit: 2 });
    expect(first.map((u) => u.id)).toEqual(ids.slice(0, 2));
    expect(first[0]).toMatchObject({ email: expect.stringContaining('@example.test'), is_email_verified: false });
    expect(await purgeInBatches((limit) => deleteExpiredUnverifiedUsers(database.db, { createdBefore: secondsAgo(TTL), limit }).then((r) => r.length), { batchSize: 2, maxBatches: 100, pauseMs: 0 })).toEqual({
      rows: 3,
      batches: 2,
      complete: true,
    });
    for (const id of ids) expect(await exists('users', id)).toBe(false);
  });

  it('two workers purging one database at once delete every expired user exactly once, without an error', async () => {
    const ids = [];
    for (let i = 0; i < 12; i++) ids.push(await insertUser({ createdAt: secondsAgo(TTL + 1000 + i) }));
    const small = { pauseMs: 0, sessionBatchSize: 3 };
    const reports = await Promise.all([worker({ batches: small }).runOnce(), worker({ batches: small }).runOnce()]);
    expect(reports.every((r) => r.complete)).toBe(true);
    expect(reports[0]!.unverifiedUsers + reports[1]!.unverifiedUsers).toBe(12);
    for (const id of ids) expect(await exists('users', id)).toBe(false);
  });

  it('reads the partial index of migration 006 (users_unverified_created_idx)', async () => {
    const { rows } = await database.db.query<{ indexdef: string }>(`SELECT indexdef FROM pg_indexes WHERE indexname = 'users_unverified_created_idx'`);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.indexdef).toMatch(/\(created_at\) WHERE \(\(email IS NOT NULL\) AND \(NOT is_email_verified\)\)/);
  });

  it.runIf(process.env.TEST_DB === 'postgres')('skips a user whose row or code a request holds (no deadlock with a verification), and deletes it once released', async () => {
    const userId = await insertUser({ createdAt: secondsAgo(TTL + 5) });
    const codeId = await insertCode(userId);
    await database.db.transaction(async (tx) => {
      await tx.query('SELECT id FROM verification_codes WHERE id = $1 FOR UPDATE', [codeId]);
      expect(await deleteExpiredUnverifiedUsers(database.db, { createdBefore: secondsAgo(TTL), limit: 100 })).toEqual([]);
    });
    await database.db.transaction(async (tx) => {
      await tx.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [userId]);
      expect(await deleteExpiredUnverifiedUsers(database.db, { createdBefore: secondsAgo(TTL), limit: 100 })).toEqual([]);
    });
    expect(await exists('users', userId)).toBe(true);
    expect((await deleteExpiredUnverifiedUsers(database.db, { createdBefore: secondsAgo(TTL), limit: 100 })).map((u) => u.id)).toEqual([userId]);
  });

  it.runIf(process.env.TEST_DB === 'postgres')('a user verified while the purge waits is kept', async () => {
    const userId = await insertUser({ createdAt: secondsAgo(TTL + 5) });
    await database.db.transaction(async (tx) => {
      await tx.query('UPDATE users SET is_email_verified = true WHERE id = $1', [userId]);
      // The row is locked by the update: skipped now, and verified once the update commits.
      expect(await deleteExpiredUnverifiedUsers(database.db, { createdBefore: secondsAgo(TTL), limit: 100 })).toEqual([]);
    });
    expect(await deleteExpiredUnverifiedUsers(database.db, { createdBefore: secondsAgo(TTL), limit: 100 })).toEqual([]);
    expect(await exists('users', userId)).toBe(true);
  });
});
