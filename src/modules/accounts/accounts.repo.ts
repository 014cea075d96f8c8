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
export async function deleteExpiredUnverifiedUsers(q: Queryable, c: { createdBefore: Date; limit: number }): Promise<DeletedUser[]> {
  const { rows } = await q.query<DeletedUser>(
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
