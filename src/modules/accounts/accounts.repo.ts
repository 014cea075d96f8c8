import type { Queryable } from '../../db/db.js';

/** What is left of a deleted user: what the deletion notice and the cancelled emails need. */
export interface DeletedUser {
  id: string;
  username: string;
  email: string | null;
  is_email_verified: boolean;
}

/**
 * Hard-deletes the user `userId` and, through the foreign keys' `ON DELETE CASCADE`, every row
 * that belongs to it: its one-time codes, devices, sessions and their refresh tokens (migration
 * 001). With `expectedHash`, only while the password hash is still that one: a password changed
 * since the caller checked it makes the deletion a no-op. A refresh or sign-in of the user that
 * holds a lock on one of those rows makes the deletion wait for it to commit, and its new rows
 * go too. Its username, email and phone are free again as soon as this commits.
 * @returns the deleted user, or undefined when nothing matched (already deleted, or the hash changed).
 */
export async function deleteUser(q: Queryable, userId: string, guard: { expectedHash?: string | undefined } = {}): Promise<DeletedUser | undefined> {
  const { rows } = await q.query<DeletedUser>(
    `DELETE FROM users WHERE id = $1 AND ($2::text IS NULL OR password_hash = $2)
      RETURNING id, username, email, is_email_verified`,
    [userId, guard.expectedHash ?? null],
  );
  return rows[0];
}

/**
 * Deletes at most `limit` users whose email was never verified and who signed up before
 * `createdBefore` (docs/api.md#unverified-accounts-expire), oldest first, with everything that
 * cascades from them. Users without email are never chosen. Reads `users_unverified_created_idx`
 * (migration 006); `FOR UPDATE SKIP LOCKED` lets two workers purge at once without waiting on or
 * double-deleting a row, and leaves a user that a verification is marking verified right now.
 * The verified check is repeated under the lock, so a user verified meanwhile stays.
 * @returns the deleted users (their addresses, to cancel the emails queued to them).
 */
export async function deleteExpiredUnverifiedUsers(q: Queryable, c: { createdBefore: Date; limit: number }): Promise<DeletedUser[]> {
  const { rows } = await q.query<DeletedUser>(
    `DELETE FROM users WHERE id IN (
       SELECT id FROM users
        WHERE email IS NOT NULL AND NOT is_email_verified AND created_at < $1
        ORDER BY created_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED)
       AND email IS NOT NULL AND NOT is_email_verified
     RETURNING id, username, email, is_email_verified`,
    [c.createdBefore, c.limit],
  );
  return rows;
}
