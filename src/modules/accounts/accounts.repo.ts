import type { Queryable } from '../../db/db.js';

/** What is left of a deleted user: what the deletion notice and the cancelled emails need. */
export interface DeletedUser {
  id: string;
  username: string;
  email: string | null;
  is_email_verified: boolean;
  /** The new addresses of its unconfirmed email changes: their code emails are queued to them, not to `email`. */
  pendingEmailChanges: string[];
}

/**
 * Hard-deletes the user `userId` and, through the foreign keys' `ON DELETE CASCADE`, every row
 * that belongs to it: its one-time codes, devices, sessions and their refresh tokens (migration
 * 001). With `expectedPasswordVersion`, only while `password_version` is still that one: a
 * password changed since the caller checked it makes the deletion a no-op (a re-hash of the same
 * password does not). Run it inside a transaction (`q` an
 * open one): the locks it takes first are held until that transaction ends.
 *
 * Lock order: the user's row first (`FOR UPDATE`, guarded by the password's version; a sign-in that is creating
 * a session holds a key-share lock on it, so the deletion waits for that sign-in to commit, and a
 * later one waits for the deletion), then every refresh token of its sessions, then the sessions,
 * then the `DELETE`. A refresh locks its token and then the token's session
 * (src/modules/sessions/refresh-tokens.repo.ts); the cascade alone would take the sessions before
 * their tokens, the opposite order, and deadlock with a refresh holding a token and waiting for
 * its session. The tokens are locked again until no new one appears: a refresh the deletion
 * waited for may have committed a successor its first scan did not see, and any later token is
 * inserted by a refresh that must first lock one of the tokens held here.
 * Its username, email and phone are free again as soon as this commits.
 * @returns the deleted user, or undefined when nothing matched (already deleted, or the password changed).
 */
export async function deleteUser(q: Queryable, userId: string, guard: { expectedPasswordVersion?: number | undefined } = {}): Promise<DeletedUser | undefined> {
  const locked = await q.query(
    'SELECT id FROM users WHERE id = $1 AND ($2::integer IS NULL OR password_version = $2) FOR UPDATE',
    [userId, guard.expectedPasswordVersion ?? null],
  );
  if (locked.rows.length === 0) return undefined;
  let tokens = -1;
  for (;;) {
    const { rows } = await q.query(
      `SELECT rt.id FROM refresh_tokens rt
        WHERE rt.session_id IN (SELECT s.id FROM sessions s WHERE s.user_id = $1)
        FOR UPDATE OF rt`,
      [userId],
    );
    if (rows.length === tokens) break;
    tokens = rows.length;
  }
  await q.query('SELECT id FROM sessions WHERE user_id = $1 FOR UPDATE', [userId]);
  const pending = await q.query<{ email: string }>(
    `SELECT DISTINCT email FROM verification_codes
      WHERE user_id = $1 AND purpose = 'email_change' AND consumed_at IS NULL AND superseded_at IS NULL`,
    [userId],
  );
  const { rows } = await q.query<Omit<DeletedUser, 'pendingEmailChanges'>>(
    'DELETE FROM users WHERE id = $1 RETURNING id, username, email, is_email_verified',
    [userId],
  );
  return rows[0] === undefined ? undefined : { ...rows[0], pendingEmailChanges: pending.rows.map((r) => r.email) };
}

/**
 * Deletes the finished outbox rows to `recipient` (sent, cancelled and dead: each holds the
 * address, and a notice also the username, IP address and user agent), in the deleting
 * transaction, after the pending ones were cancelled. A row being sent right now stays pending
 * until its attempt ends, then the retention worker deletes it. Scans the finished rows (no
 * recipient index covers them); an account is deleted rarely.
 * @returns how many rows were deleted.
 */
export async function deleteFinishedEmailsTo(q: Queryable, recipient: string): Promise<number> {
  const { rowCount } = await q.query(
    `DELETE FROM email_outbox WHERE recipient = $1 AND status IN ('sent', 'cancelled', 'dead')`,
    [recipient],
  );
  return rowCount ?? 0;
}

/**
 * Deletes at most `limit` users whose email was never verified and who signed up strictly before
 * `createdBefore` (docs/api.md#unverified-accounts-expire), oldest first, with what cascades
 * from them (their codes; such a user cannot sign in, so it has no session). Users without
 * email are never chosen. Reads `users_unverified_created_idx` (migration 006) and deletes by
 * physical address, as the retention purges do (src/modules/retention/retention.repo.ts).
 *
 * Concurrency: users are taken with `FOR UPDATE SKIP LOCKED`, so two workers purge disjoint
 * rows and a user a request holds is left for a later call. A verification locks its code, then
 * marks the user verified; this statement locks the other way round, so it also takes the
 * users' codes with `SKIP LOCKED` and leaves a user one of whose codes is held (no deadlock, and
 * a user being verified right now is not deleted under it). The lock re-checks the conditions
 * on the newest row version, so a user verified since the statement began stays.
 * @returns the deleted users.
 */
export async function deleteExpiredUnverifiedUsers(q: Queryable, c: { createdBefore: Date; limit: number }): Promise<Omit<DeletedUser, 'pendingEmailChanges'>[]> {
  const { rows } = await q.query<Omit<DeletedUser, 'pendingEmailChanges'>>(
    `WITH expired AS MATERIALIZED (
       SELECT id, ctid FROM users
        WHERE email IS NOT NULL AND NOT is_email_verified AND created_at < $1
        ORDER BY created_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
     ), held AS MATERIALIZED (
       SELECT vc.id FROM verification_codes vc
        WHERE vc.user_id IN (SELECT id FROM expired)
        FOR UPDATE SKIP LOCKED
     ), deletable AS MATERIALIZED (
       SELECT e.ctid FROM expired e
        WHERE NOT EXISTS (SELECT 1 FROM verification_codes vc WHERE vc.user_id = e.id AND vc.id NOT IN (SELECT id FROM held))
     )
     DELETE FROM users WHERE ctid = ANY(ARRAY(SELECT ctid FROM deletable))
     RETURNING id, username, email, is_email_verified`,
    [c.createdBefore, c.limit],
  );
  return rows;
}
