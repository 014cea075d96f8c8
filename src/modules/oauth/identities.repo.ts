import type { Queryable } from '../../db/db.js';

/** A `user_identities` row as the wire Identity needs it (docs/api.md#identity), plus its owner. */
export interface IdentityRow {
  id: string;
  user_id: string;
  provider: string;
  email: string | null;
  created_at: Date;
  last_sign_in_at: Date | null;
}

const IDENTITY_COLUMNS = 'id, user_id, provider, email, created_at, last_sign_in_at';

/** The identity (issuer, subject), or undefined (index `user_identities_issuer_subject_key`). */
export async function findIdentity(q: Queryable, issuer: string, subject: string): Promise<IdentityRow | undefined> {
  const { rows } = await q.query<IdentityRow>(`SELECT ${IDENTITY_COLUMNS} FROM user_identities WHERE issuer = $1 AND subject = $2`, [issuer, subject]);
  return rows[0];
}

/**
 * Links the identity (issuer, subject) to `userId`, unless it exists: the unique index decides
 * a race between two links of one identity (the second finds the first's row).
 * @returns the identity as stored and whether this call created it; its owner may be another user.
 */
export async function linkIdentity(
  q: Queryable,
  i: { id: string; userId: string; provider: string; issuer: string; subject: string; email: string | null; now: Date },
): Promise<{ identity: IdentityRow; created: boolean }> {
  const { rows } = await q.query<IdentityRow>(
    `INSERT INTO user_identities (id, user_id, provider, issuer, subject, email, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (issuer, subject) DO NOTHING RETURNING ${IDENTITY_COLUMNS}`,
    [i.id, i.userId, i.provider, i.issuer, i.subject, i.email, i.now],
  );
  if (rows[0] !== undefined) return { identity: rows[0], created: true };
  const existing = await findIdentity(q, i.issuer, i.subject);
  if (existing === undefined) throw new Error('identity neither inserted nor found');
  return { identity: existing, created: false };
}

/** Records a sign-in with the identity: `last_sign_in_at`, and the provider's verified email as it is now. */
export async function recordIdentitySignIn(q: Queryable, id: string, c: { email: string | null; now: Date }): Promise<void> {
  await q.query('UPDATE user_identities SET last_sign_in_at = $2, email = $3 WHERE id = $1', [id, c.now, c.email]);
}

/** The identities of a user, oldest first (index `user_identities_user_idx`). */
export async function listIdentities(q: Queryable, userId: string): Promise<IdentityRow[]> {
  const { rows } = await q.query<IdentityRow>(`SELECT ${IDENTITY_COLUMNS} FROM user_identities WHERE user_id = $1 ORDER BY created_at, id`, [userId]);
  return rows;
}

/** The identity with this id, or undefined. */
export async function findIdentityById(q: Queryable, id: string): Promise<IdentityRow | undefined> {
  const { rows } = await q.query<IdentityRow>(`SELECT ${IDENTITY_COLUMNS} FROM user_identities WHERE id = $1`, [id]);
  return rows[0];
}

/**
 * How `userId` can sign in besides the identity `exceptIdentityId`: a password, a passkey, or
 * another identity (indexes: users' primary key, `passkeys_user_idx`, `user_identities_user_idx`).
 * Run under the user's row lock (`lockUserRow`) so that two unlinks cannot each leave the other
 * as the last way in.
 */
export async function hasOtherSignInMethod(q: Queryable, userId: string, exceptIdentityId: string): Promise<boolean> {
  const { rows } = await q.query<{ other: boolean }>(
    `SELECT (SELECT password_hash IS NOT NULL FROM users WHERE id = $1)
         OR EXISTS (SELECT 1 FROM passkeys WHERE user_id = $1)
         OR EXISTS (SELECT 1 FROM user_identities WHERE user_id = $1 AND id <> $2) AS other`,
    [userId, exceptIdentityId],
  );
  return rows[0]?.other === true;
}

/** Deletes an identity of `userId`. @returns false when it was gone (or is another user's). */
export async function deleteIdentity(q: Queryable, id: string, userId: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM user_identities WHERE id = $1 AND user_id = $2', [id, userId]);
  return rowCount === 1;
}
