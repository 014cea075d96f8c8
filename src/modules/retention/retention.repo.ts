import type { Queryable } from '../../db/db.js';
import { batchedDeleteSql } from '../../db/batches.js';

/**
 * The statements of the retention worker (docs/operations.md, "Retention"). Each deletes (or
 * erases) at most `limit` rows per call, chosen in the order of an index of migration 003 with
 * `FOR UPDATE SKIP LOCKED`: one call touches a bounded number of rows whatever the table's
 * size, never waits for a row a request holds (that row is left for a later call), and several
 * instances purging at once take disjoint rows. Callers loop while a call returned `limit`
 * (`purgeInBatches`). `before` is a cutoff instant: only rows that ended strictly before it go.
 *
 * The rows are deleted by their physical address (`ctid = ANY(ARRAY(...))`, a TID scan), not
 * looked up again by primary key: a lookup of 1 000 random UUIDs reads about one index page per
 * row once the table outgrows memory, which made a batch 5 to 40 times slower at a million rows
 * (docs/performance.md, "Retention and the cost of a growing database"). The address is that of
 * the version this statement locked, which nobody else can change until it commits; should the
 * row have changed between the statement's snapshot and the lock, it is not deleted (the next
 * batch sees it again), never another row.
 */

/** What one call of {@link purgeEndedSessions} deleted. */
export interface PurgedSessions {
  /** Sessions deleted, and with each its refresh tokens (ON DELETE CASCADE). */
  sessions: number;
  /** Devices deleted because no session refers to them any more. */
  devices: number;
}

/**
 * Deletes up to `limit` sessions that stopped being usable (expired or revoked, whichever came
 * first: `least(expires_at, revoked_at)`, index `sessions_ended_idx`) before `before`, their
 * refresh tokens with them (ON DELETE CASCADE), and their devices once no other session refers
 * to them. The rotated tokens of a session are what makes reuse detectable (docs/api.md#reuse-detection),
 * which is moot once the session has ended: a token of a deleted session is answered as
 * unknown (`auth.invalid_refresh_token`) instead of reused.
 *
 * A refresh locks a token, then its session (`lockRefreshToken`); this statement locks the
 * other way round, so it takes both with `SKIP LOCKED`: the sessions, then their tokens. A
 * session one of whose tokens a request holds is left for a later call, so the cascade never
 * waits for a token while holding a session that request waits for (no deadlock).
 *
 * @param before sessions that ended strictly before this instant go.
 * @param limit most sessions deleted by this call (each with all its tokens).
 */
export async function purgeEndedSessions(q: Queryable, before: Date, limit: number): Promise<PurgedSessions> {
  const { rows } = await q.query<PurgedSessions>(
    `WITH ended AS MATERIALIZED (
       SELECT id, ctid FROM sessions
        WHERE least(expires_at, revoked_at) < $1
        ORDER BY least(expires_at, revoked_at)
        LIMIT $2
        FOR UPDATE SKIP LOCKED
     ), held AS MATERIALIZED (
       SELECT rt.id FROM refresh_tokens rt
        WHERE rt.session_id IN (SELECT id FROM ended)
        FOR UPDATE SKIP LOCKED
     ), deletable AS MATERIALIZED (
       SELECT e.id, e.ctid FROM ended e
        WHERE NOT EXISTS (SELECT 1 FROM refresh_tokens rt WHERE rt.session_id = e.id AND rt.id NOT IN (SELECT id FROM held))
     ), gone AS (
       DELETE FROM sessions WHERE ctid = ANY(ARRAY(SELECT ctid FROM deletable)) RETURNING id, device_id
     ), devices_gone AS (
       DELETE FROM devices dv
        WHERE dv.id IN (SELECT device_id FROM gone)
          AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.device_id = dv.id AND s.id NOT IN (SELECT id FROM gone))
       RETURNING dv.id
     )
     SELECT (SELECT count(*) FROM gone)::int AS sessions, (SELECT count(*) FROM devices_gone)::int AS devices`,
    [before, limit],
  );
  return rows[0] ?? { sessions: 0, devices: 0 };
}

/**
 * Deletes up to `limit` verification codes that stopped being usable (expired, consumed or
 * superseded, whichever came first: index `verification_codes_ended_idx`) before `before`.
 * A code that died of too many wrong attempts is usable no more either, and goes with its expiry.
 * @returns how many codes were deleted.
 */
export async function purgeEndedVerificationCodes(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(
    batchedDeleteSql('verification_codes', { ended: 'least(expires_at, consumed_at, superseded_at)' }),
    [before, limit],
  );
  return rowCount;
}

/**
 * Deletes up to `limit` second-step sign-in challenges that expired before `before` (index
 * `mfa_challenges_expires_idx`; a used or dead challenge goes with its expiry, 300 s after it
 * was made). Each holds a copy of a password hash, so none is kept longer than that.
 * @returns how many challenges were deleted.
 */
export async function purgeExpiredMfaChallenges(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(batchedDeleteSql('mfa_challenges', { ended: 'expires_at' }), [before, limit]);
  return rowCount;
}

/**
 * Deletes up to `limit` passkey challenges that expired before `before` (index
 * `webauthn_challenges_expires_idx`): options asked for and never answered. A used challenge is
 * deleted when it is used.
 * @returns how many challenges were deleted.
 */
export async function purgeExpiredWebauthnChallenges(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(batchedDeleteSql('webauthn_challenges', { ended: 'expires_at' }), [before, limit]);
  return rowCount;
}

/**
 * Deletes up to `limit` identity-provider flows that expired before `before` (index
 * `oauth_flows_expires_idx`, migration 015): used ones and those never completed alike, 600 s
 * after they started. Each holds a PKCE verifier, so none is kept longer than that.
 * @returns how many flows were deleted.
 */
export async function purgeExpiredOAuthFlows(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(batchedDeleteSql('oauth_flows', { ended: 'expires_at' }), [before, limit]);
  return rowCount;
}

/**
 * Deletes up to `limit` sent, suppressed or cancelled outbox rows queued before `before` (index
 * `email_outbox_ended_idx`, migration 012). A row is finished at most one code lifetime after it was
 * queued (the worker cancels a row whose code expired), so its queueing time stands for its end.
 * @returns how many rows were deleted.
 */
export async function purgeFinishedEmails(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(
    batchedDeleteSql('email_outbox', { where: "status IN ('sent', 'suppressed', 'cancelled')", ended: 'created_at' }),
    [before, limit],
  );
  return rowCount;
}

/**
 * Deletes up to `limit` dead outbox rows queued before `before` (index `email_outbox_dead_idx`).
 * A row that `outbox retry` put back to pending meanwhile is not dead any more and stays (the
 * condition is checked again on the locked row).
 * @returns how many rows were deleted.
 */
export async function purgeDeadEmails(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(
    batchedDeleteSql('email_outbox', { where: "status = 'dead'", ended: 'created_at' }),
    [before, limit],
  );
  return rowCount;
}

/**
 * Erases (sets to NULL) up to `limit` sealed successors (`successor_ciphertext`, migration 002)
 * sealed before `before`, oldest first (index `refresh_tokens_sealed_at_idx`, migration 019). Called
 * with `before = now - REFRESH_REUSE_GRACE_SECONDS`: the seal serves only the grace window
 * (docs/api.md#refresh-token-rotation), and once the window has passed, presenting the parent is reuse whether or
 * not the seal is there; without it a database dump plus an old parent token never yields a
 * live token. A token a refresh holds is skipped (`SKIP LOCKED`) and erased by a later call.
 * @returns how many seals were erased.
 */
export async function eraseExpiredSuccessors(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(
    `UPDATE refresh_tokens SET successor_ciphertext = NULL, sealed_at = NULL WHERE ctid = ANY(ARRAY(
       SELECT ctid FROM refresh_tokens
        WHERE sealed_at < $1
        ORDER BY sealed_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED))`,
    [before, limit],
  );
  return rowCount;
}

/**
 * Deletes up to `limit` admin API audit entries written before `before`, oldest first (index
 * `admin_audit_log_at_idx`, migration 017): RETENTION_ADMIN_AUDIT_DAYS after they were written.
 * @returns how many entries were deleted.
 */
export async function purgeAdminAuditEntries(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(batchedDeleteSql('admin_audit_log', { ended: 'at' }), [before, limit]);
  return rowCount;
}
