import type { Queryable } from '../../db/db.js';
import type { SecurityNoticeKind } from './mail.templates.js';

/** What an outbox row asks to send; `code` is removed once the email is sent, dead or expired. */
export interface VerificationEmailPayload {
  username: string;
  code?: string;
}

/**
 * What a notice row asks to send (docs/api.md#security-notices): the facts the notice states,
 * never a code or a reference to the user (the row outlives a deleted account).
 */
export interface SecurityNoticePayload {
  notice: SecurityNoticeKind;
  username: string;
  /** When it happened, ISO 8601 UTC. */
  at: string;
  ip: string | null;
  user_agent: string | null;
  /** Facts particular to the change, one per line; absent when there are none. */
  details?: string[];
}

/** The kinds of outbox rows that carry a one-time code: one per code purpose (src/modules/codes/). */
export type CodeEmailKind = 'verification' | 'password_reset' | 'email_change';

/**
 * A password-reset request waiting for its work (no email of its own): the worker looks the
 * recipient up and, for a known user, issues the reset code and queues its email in one
 * transaction; for an unknown address it only marks the row done. The row holds the address only.
 */
export type PasswordResetRequestKind = 'password_reset_request';

/** The kinds of outbox rows: a verification code, a security notice, or a password-reset request. */
export type OutboxKind = CodeEmailKind | 'notice' | PasswordResetRequestKind;

/**
 * Outbox row status (docs/decisions.md#email-outbox): `pending` waits for the worker; `sent` was
 * accepted by the relay (a password-reset request: its code and email were queued); `suppressed`
 * finished with nothing to send (a password-reset request for an address no account has);
 * `dead` was given up; `cancelled` expired or was superseded before it could be sent.
 */
export type OutboxStatus = 'pending' | 'sent' | 'suppressed' | 'dead' | 'cancelled';

/** A row claimed by a worker under a lease. */
export type ClaimedEmail =
  | { id: string; kind: CodeEmailKind; recipient: string; payload: VerificationEmailPayload; attempts: number; expires_at: Date | null }
  | { id: string; kind: 'notice'; recipient: string; payload: SecurityNoticePayload; attempts: number; expires_at: Date | null }
  | { id: string; kind: PasswordResetRequestKind; recipient: string; payload: Record<string, never>; attempts: number; expires_at: Date | null };

/**
 * Queues an email. Call it inside the transaction that creates what the email announces,
 * so both commit or neither does (transactional outbox, docs/decisions.md#email-outbox).
 * @param expiresAt when the content stops being useful (the code's expiry): not sent after it.
 */
export async function enqueueEmail(
  q: Queryable,
  e: (
    | { kind: CodeEmailKind; payload: VerificationEmailPayload }
    | { kind: 'notice'; payload: SecurityNoticePayload }
    | { kind: PasswordResetRequestKind; payload: Record<string, never> }
  ) & {
    id: string;
    recipient: string;
    now: Date;
    expiresAt: Date | null;
  },
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

/**
 * Records a delivery (`attempts + 1`) and drops the code from the payload. Only the lease holder may.
 * @returns false when `owner` no longer holds the row's lease (nothing changed).
 */
export async function markSent(q: Queryable, id: string, owner: string, now: Date): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE email_outbox SET status = 'sent', attempts = attempts + 1, sent_at = $3, payload = payload - 'code', lease_owner = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_owner = $2`,
    [id, owner, now],
  );
  return rowCount === 1;
}

/**
 * Records a failed attempt: `attempts + 1`, `last_error`, and either the next try at
 * `retryAt` or, when `retryAt` is null, status dead. A dead row keeps its code until the code
 * expires ({@link cancelExpiredEmails} drops it then), so an operator can retry it.
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
            lease_owner = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_owner = $2`,
    [id, owner, f.error, f.retryAt],
  );
}

/**
 * Marks a leased row `suppressed`: finished, nothing sent, because there was nothing to send;
 * `reason` goes to `last_error` (shown by `outbox list`). Counts the attempt, as {@link markSent}.
 * Only the lease holder may.
 * @returns false when `owner` no longer holds the row's lease (nothing changed).
 */
export async function markSuppressed(q: Queryable, id: string, owner: string, reason: string): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE email_outbox SET status = 'suppressed', attempts = attempts + 1, last_error = $3, payload = payload - 'code', lease_owner = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_owner = $2`,
    [id, owner, reason],
  );
  return rowCount === 1;
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
 * Cancels pending rows whose content expired and drops the code of dead rows whose code expired
 * (docs/api.md#verification-codes: the code stays in the payload only until sent or expired; a dead row keeps
 * it until then so that `outbox retry` can still send it). Leased rows are left to their worker.
 * Runs every round (every second): each statement reads only its partial index
 * (`email_outbox_due_idx`, `email_outbox_dead_code_idx`), never the table of sent rows.
 * @returns how many pending rows were cancelled.
 */
export async function cancelExpiredEmails(q: Queryable, now: Date): Promise<number> {
  const { rowCount } = await q.query(
    `UPDATE email_outbox SET status = 'cancelled', last_error = 'expired before delivery', payload = payload - 'code'
      WHERE status = 'pending' AND expires_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)`,
    [now],
  );
  await q.query(
    `UPDATE email_outbox SET payload = payload - 'code' WHERE status = 'dead' AND expires_at <= $1 AND payload ? 'code'`,
    [now],
  );
  return rowCount;
}

/**
 * Cancels the pending emails of `kind` to `recipient` (their content was superseded, for
 * example by a newer verification code) and drops the code of dead ones, so `outbox retry`
 * cannot send it either. A row leased right now is being sent: its attempt goes on, but it is
 * made to expire now, so that if the attempt fails, or its worker dies, the row is cancelled
 * (`cancelExpiredEmails`, and the worker's check before each send) instead of being retried
 * after the newer email. Finds the rows through `email_outbox_recipient_idx` (pending and dead
 * rows by recipient).
 * @returns how many rows changed.
 */
export async function cancelPendingEmails(q: Queryable, c: { kind: string; recipient: string; reason: string; now: Date }): Promise<number> {
  return cancelQueuedEmails(q, c);
}

/**
 * Cancels every queued email to `recipient`, of every kind (the account it concerns was deleted,
 * docs/api.md#delete-account), and drops the code of its dead rows, so `outbox retry` cannot send
 * them either; a row leased right now is handled as by {@link cancelPendingEmails}. Reads
 * `email_outbox_recipient_idx`. Call it before queueing the deletion notice in the same
 * transaction, or the notice is cancelled too.
 * @returns how many rows changed.
 */
export async function cancelEmailsTo(q: Queryable, c: { recipient: string; reason: string; now: Date }): Promise<number> {
  return cancelQueuedEmails(q, { ...c, kind: null });
}

/** {@link cancelPendingEmails} for the rows of one `kind`, or of every kind when `kind` is null. */
async function cancelQueuedEmails(q: Queryable, c: { kind: string | null; recipient: string; reason: string; now: Date }): Promise<number> {
  const leased = 'lease_expires_at IS NOT NULL AND lease_expires_at > $4';
  const { rowCount } = await q.query(
    `UPDATE email_outbox
        SET status = CASE WHEN status = 'pending' AND NOT (${leased}) THEN 'cancelled' ELSE status END,
            last_error = CASE WHEN status = 'pending' AND NOT (${leased}) THEN $3 ELSE last_error END,
            payload = CASE WHEN status = 'pending' AND ${leased} THEN payload ELSE payload - 'code' END,
            expires_at = CASE WHEN status = 'pending' AND ${leased} THEN least(expires_at, $4) ELSE expires_at END
      WHERE ($1::text IS NULL OR kind = $1) AND recipient = $2 AND (status = 'pending' OR (status = 'dead' AND payload ? 'code'))`,
    [c.kind, c.recipient, c.reason, c.now],
  );
  return rowCount;
}

/**
 * Releases every lease held by `owner` (graceful shutdown), so another worker can claim at once.
 * Only pending rows are leased (each outcome clears the lease), so only those are searched
 * (`email_outbox_due_idx`), not the whole table.
 */
export async function releaseLeases(q: Queryable, owner: string): Promise<void> {
  await q.query(`UPDATE email_outbox SET lease_owner = NULL, lease_expires_at = NULL WHERE status = 'pending' AND lease_owner = $1`, [owner]);
}

/** An outbox row as operators see it (`latchkey outbox list`): never the payload, which may hold a code. */
export interface OutboxListRow {
  id: string;
  /** What the row is: a code's email, a notice, or a password-reset request ({@link OutboxKind}). */
  kind: OutboxKind;
  status: OutboxStatus;
  recipient: string;
  attempts: number;
  last_error: string | null;
  next_attempt_at: Date;
  created_at: Date;
}

/**
 * Outbox rows, newest first (`created_at`, then `id`), optionally of one status, at most `limit`.
 * Reads no payload.
 */
export async function listOutboxEmails(q: Queryable, f: { status?: OutboxStatus | undefined; limit: number }): Promise<OutboxListRow[]> {
  const { rows } = await q.query<OutboxListRow>(
    `SELECT id, kind, status, recipient, attempts, last_error, next_attempt_at, created_at FROM email_outbox
      WHERE $1::text IS NULL OR status = $1
      ORDER BY created_at DESC, id DESC
      LIMIT $2`,
    [f.status ?? null, f.limit],
  );
  return rows;
}

/**
 * How many outbox rows are pending and how many are dead (metric `auth_outbox_emails`), each
 * counted through its partial index (`email_outbox_due_idx`, `email_outbox_dead_idx`): the cost
 * follows the backlog, not the table, which holds mostly sent rows (docs/performance.md,
 * "Retention and the cost of a growing database").
 */
export async function countOutboxBacklog(q: Queryable): Promise<{ pending: number; dead: number }> {
  const { rows } = await q.query<{ pending: number; dead: number }>(
    `SELECT (SELECT count(*) FROM email_outbox WHERE status = 'pending')::int AS pending,
            (SELECT count(*) FROM email_outbox WHERE status = 'dead')::int AS dead`,
  );
  return rows[0] ?? { pending: 0, dead: 0 };
}

/**
 * How many outbox rows there are of each status (statuses without rows are absent), for
 * `latchkey outbox list`. Reads the whole table: for an operator's command, not a scrape
 * ({@link countOutboxBacklog}).
 */
export async function countOutboxEmailsByStatus(q: Queryable): Promise<Partial<Record<OutboxStatus, number>>> {
  const { rows } = await q.query<{ status: OutboxStatus; n: number }>('SELECT status, count(*)::int AS n FROM email_outbox GROUP BY status');
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/** A dead row put back to pending by {@link retryDeadEmails}, with what decides whether it can still be sent. */
export interface RetriedEmail {
  id: string;
  recipient: string;
  /** False when the payload holds no code any more (a row loses its code when it dies): the worker will cancel it. */
  has_code: boolean;
  expires_at: Date | null;
}

/**
 * Puts dead rows back to pending for another round of attempts (`latchkey outbox retry`):
 * `attempts` back to 0, `next_attempt_at = now`, lease cleared, `last_error` kept as the history
 * of the last failure. Only rows whose status is `dead` change, in one guarded `UPDATE`, so a
 * row is never retried twice by parallel calls and rows of other statuses are left alone.
 *
 * The worker then treats each like any pending row: a row whose content expired, or whose code
 * was already dropped (dead rows lose their code, docs/decisions.md#email-outbox), is cancelled instead of sent.
 *
 * @param target one row id (a UUID), or `all-dead` for every dead row.
 * @returns the rows this call put back (empty when nothing matched).
 */
export async function retryDeadEmails(q: Queryable, target: { id: string } | 'all-dead', now: Date): Promise<RetriedEmail[]> {
  const { rows } = await q.query<RetriedEmail>(
    `UPDATE email_outbox
        SET status = 'pending', attempts = 0, next_attempt_at = $1, lease_owner = NULL, lease_expires_at = NULL
      WHERE status = 'dead' AND ($2::uuid IS NULL OR id = $2::uuid)
      RETURNING id, recipient, (payload ? 'code') AS has_code, expires_at`,
    [now, target === 'all-dead' ? null : target.id],
  );
  return rows;
}

/** The status of one outbox row, or undefined when there is no row with that id. */
export async function findOutboxStatus(q: Queryable, id: string): Promise<OutboxStatus | undefined> {
  const { rows } = await q.query<{ status: OutboxStatus }>('SELECT status FROM email_outbox WHERE id = $1', [id]);
  return rows[0]?.status;
}

/**
 * When the oldest pending row was queued, or null when none is pending (metric
 * `auth_outbox_oldest_pending_age_seconds`). Reads only pending rows (partial index).
 */
export async function oldestPendingEmailCreatedAt(q: Queryable): Promise<Date | null> {
  const { rows } = await q.query<{ oldest: Date | null }>(`SELECT min(created_at) AS oldest FROM email_outbox WHERE status = 'pending'`);
  return rows[0]?.oldest ?? null;
}
