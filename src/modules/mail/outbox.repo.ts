import type { Queryable } from '../../db/db.js';

/** What an outbox row asks to send; `code` is removed once the email is sent, dead or expired. */
export interface VerificationEmailPayload {
  username: string;
  code?: string;
}

/** Outbox row status (decisions.md §8). */
export type OutboxStatus = 'pending' | 'sent' | 'dead' | 'cancelled';

/** A row claimed by a worker under a lease. */
export interface ClaimedEmail {
  id: string;
  kind: 'verification';
  recipient: string;
  payload: VerificationEmailPayload;
  attempts: number;
  expires_at: Date | null;
}

/**
 * Queues an email. Call it inside the transaction that creates what the email announces,
 * so both commit or neither does (transactional outbox, decisions.md §8).
 * @param expiresAt when the content stops being useful (the code's expiry): not sent after it.
 */
export async function enqueueEmail(
  q: Queryable,
  e: { id: string; kind: 'verification'; recipient: string; payload: VerificationEmailPayload; now: Date; expiresAt: Date | null },
): Promise<void> {
  await q.query(
    `INSERT INTO email_outbox (id, kind, recipient, payload, created_at, next_attempt_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $5, $6)`,
    [e.id, e.kind, e.recipient, JSON.stringify(e.payload), e.now, e.expiresAt],
  );
}

/**
 * Claims up to `limit` due pending rows for `owner` until `leaseUntil`. `FOR UPDATE SKIP LOCKED`
 * lets several workers claim at once without waiting on or double-claiming a row; a row whose
 * lease ran out (its worker died) is due again.
 */
export async function claimDueEmails(
  q: Queryable,
  c: { owner: string; now: Date; leaseUntil: Date; limit: number },
): Promise<ClaimedEmail[]> {
  const { rows } = await q.query<ClaimedEmail>(
    `UPDATE email_outbox SET lease_owner = $2, lease_expires_at = $3
      WHERE id IN (
        SELECT id FROM email_outbox
         WHERE status = 'pending' AND next_attempt_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
         ORDER BY next_attempt_at
         LIMIT $4
         FOR UPDATE SKIP LOCKED)
      RETURNING id, kind, recipient, payload, attempts, expires_at`,
    [c.now, c.owner, c.leaseUntil, c.limit],
  );
  return rows;
}

/** Records a delivery (`attempts + 1`) and drops the code from the payload. Only the lease holder may. */
export async function markSent(q: Queryable, id: string, owner: string, now: Date): Promise<void> {
  await q.query(
    `UPDATE email_outbox SET status = 'sent', attempts = attempts + 1, sent_at = $3, payload = payload - 'code', lease_owner = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_owner = $2`,
    [id, owner, now],
  );
}

/**
 * Records a failed attempt: `attempts + 1`, `last_error`, and either the next try at
 * `retryAt` or, when `retryAt` is null, status dead (code dropped from the payload).
 */
export async function markFailed(
  q: Queryable,
  id: string,
  owner: string,
  f: { error: string; retryAt: Date | null },
): Promise<void> {
  await q.query(
    `UPDATE email_outbox
        SET attempts = attempts + 1, last_error = $3,
            status = CASE WHEN $4::timestamptz IS NULL THEN 'dead' ELSE 'pending' END,
            next_attempt_at = COALESCE($4::timestamptz, next_attempt_at),
            payload = CASE WHEN $4::timestamptz IS NULL THEN payload - 'code' ELSE payload END,
            lease_owner = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_owner = $2`,
    [id, owner, f.error, f.retryAt],
  );
}

/** Marks a row cancelled (its content expired before it could be sent) and drops the code. */
export async function markCancelled(q: Queryable, id: string, owner: string, reason: string): Promise<void> {
  await q.query(
    `UPDATE email_outbox SET status = 'cancelled', last_error = $3, payload = payload - 'code', lease_owner = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_owner = $2`,
    [id, owner, reason],
  );
}

/**
 * Cancels pending rows whose content expired, dropping their codes (decisions.md §6: the code
 * stays in the payload only until sent or expired). Leased rows are left to their worker.
 * @returns how many rows were cancelled.
 */
export async function cancelExpiredEmails(q: Queryable, now: Date): Promise<number> {
  const { rowCount } = await q.query(
    `UPDATE email_outbox SET status = 'cancelled', last_error = 'expired before delivery', payload = payload - 'code'
      WHERE status = 'pending' AND expires_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)`,
    [now],
  );
  return rowCount;
}

/** Releases every lease held by `owner` (graceful shutdown), so another worker can claim at once. */
export async function releaseLeases(q: Queryable, owner: string): Promise<void> {
  await q.query('UPDATE email_outbox SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = $1', [owner]);
}
