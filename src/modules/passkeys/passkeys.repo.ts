import type { Queryable } from '../../db/db.js';
import type { SqlParams } from '../../db/sql-params.js';
import { SIGN_IN_USER_COLUMNS, type SignInUser } from '../users/users.shared.js';

/** A passkey as stored (migration 009). */
export interface PasskeyRow {
  id: string;
  user_id: string;
  /** The authenticator's credential id, base64url. */
  credential_id: string;
  /** The COSE public key (a Buffer from `pg`, a Uint8Array from PGlite). */
  public_key: Uint8Array;
  /** The highest signature counter seen (0: the authenticator keeps none). */
  counter: number;
  transports: string[];
  name: string | null;
  created_at: Date;
  last_used_at: Date | null;
}

/** A new credential to store. */
export interface NewPasskey {
  readonly id: string;
  readonly userId: string;
  readonly credentialId: string;
  readonly publicKey: Uint8Array;
  readonly counter: number;
  readonly transports: readonly string[];
  readonly deviceType: string;
  readonly backedUp: boolean;
  readonly name: string | null;
  readonly now: Date;
}

const PASSKEY_COLUMNS = 'p.id, p.user_id, p.credential_id, p.public_key, p.counter::float8 AS counter, p.transports, p.name, p.created_at, p.last_used_at';

/**
 * The account's WebAuthn user handle: the stored one, or else `candidate` (random bytes from the
 * caller), stored for good. Read first, so only the first registration writes the user row; the
 * write keeps a handle stored meanwhile by a parallel first registration (COALESCE).
 * @returns the handle, or undefined when the user does not exist.
 */
export async function userHandleOf(q: Queryable, userId: string, candidate: Buffer): Promise<Uint8Array | undefined> {
  const { rows: found } = await q.query<{ webauthn_user_handle: Uint8Array | null }>('SELECT webauthn_user_handle FROM users WHERE id = $1', [userId]);
  const stored = found[0];
  if (stored === undefined || stored.webauthn_user_handle !== null) return stored?.webauthn_user_handle ?? undefined;
  const { rows } = await q.query<{ webauthn_user_handle: Uint8Array }>(
    `UPDATE users SET webauthn_user_handle = COALESCE(webauthn_user_handle, $2) WHERE id = $1 RETURNING webauthn_user_handle`,
    [userId, candidate],
  );
  return rows[0]?.webauthn_user_handle;
}

/** The user's passkeys, oldest first. */
export async function listPasskeys(q: Queryable, userId: string): Promise<PasskeyRow[]> {
  const { rows } = await q.query<PasskeyRow>(`SELECT ${PASSKEY_COLUMNS} FROM passkeys p WHERE p.user_id = $1 ORDER BY p.created_at, p.id`, [userId]);
  return rows;
}

/** How many passkeys the user has. */
export async function countPasskeys(q: Queryable, userId: string): Promise<number> {
  const { rows } = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM passkeys WHERE user_id = $1', [userId]);
  return rows[0]?.n ?? 0;
}

/**
 * Stores a credential. @returns false when the credential id is already registered (to anyone):
 * nothing is stored.
 */
export async function insertPasskey(q: Queryable, p: NewPasskey): Promise<boolean> {
  const { rowCount } = await q.query(
    `INSERT INTO passkeys (id, user_id, credential_id, public_key, counter, transports, device_type, backed_up, name, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (credential_id) DO NOTHING`,
    [p.id, p.userId, p.credentialId, Buffer.from(p.publicKey), p.counter, [...p.transports], p.deviceType, p.backedUp, p.name, p.now],
  );
  return rowCount === 1;
}

/** The passkey with this id and its owner's id, or undefined. */
export async function findPasskey(q: Queryable, id: string): Promise<PasskeyRow | undefined> {
  const { rows } = await q.query<PasskeyRow>(`SELECT ${PASSKEY_COLUMNS} FROM passkeys p WHERE p.id = $1`, [id]);
  return rows[0];
}

/**
 * The SELECT of a passkey by credential id with its owner as a sign-in checks it (SignInUser) and
 * the owner's WebAuthn user handle, its parameter added to `p`, for a statement that runs it
 * along with other work: a passkey sign-in counts its attempt and finds the credential in one
 * round trip (sign-in.repo.ts).
 */
export function passkeyWithOwnerSql(p: SqlParams, credentialId: string): string {
  const $credentialId = p.add(credentialId);
  return `SELECT ${SIGN_IN_USER_COLUMNS}, users.webauthn_user_handle,
                 p.id AS passkey_id, p.credential_id, p.public_key, p.counter::float8 AS counter, p.transports
            FROM passkeys p JOIN users ON users.id = p.user_id WHERE p.credential_id = ${$credentialId}`;
}

/** A row of {@link passkeyWithOwnerSql}: the owner and the credential. */
export type PasskeyWithOwner = SignInUser & {
  webauthn_user_handle: Uint8Array | null;
  passkey_id: string;
  credential_id: string;
  public_key: Uint8Array;
  counter: number;
  transports: string[];
};

/**
 * Records a verified assertion: the new signature counter and `last_used_at`, only while the
 * counter goes up (or stays 0 for an authenticator that keeps none), so of two assertions with
 * one counter, on any instance, at most one passes, and a cloned authenticator lagging behind is
 * refused. (For a counter of 0 the single-use challenge alone stops a replay.)
 * @returns false when the counter did not increase, or the passkey is gone.
 */
export async function recordPasskeyUse(q: Queryable, c: { id: string; counter: number; backedUp: boolean; now: Date }): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE passkeys SET counter = $2, backed_up = $3, last_used_at = $4
      WHERE id = $1 AND (counter < $2 OR (counter = 0 AND $2 = 0))`,
    [c.id, c.counter, c.backedUp, c.now],
  );
  return rowCount === 1;
}

/** Renames the user's passkey. @returns the row, or undefined when the user has no passkey with this id. */
export async function renamePasskey(q: Queryable, c: { id: string; userId: string; name: string | null }): Promise<PasskeyRow | undefined> {
  const { rows } = await q.query<PasskeyRow>(
    `UPDATE passkeys p SET name = $3 WHERE p.id = $1 AND p.user_id = $2 RETURNING ${PASSKEY_COLUMNS}`,
    [c.id, c.userId, c.name],
  );
  return rows[0];
}

/** Deletes the user's passkey. @returns the deleted row, or undefined when the user has no passkey with this id. */
export async function deletePasskey(q: Queryable, c: { id: string; userId: string }): Promise<PasskeyRow | undefined> {
  const { rows } = await q.query<PasskeyRow>(`DELETE FROM passkeys p WHERE p.id = $1 AND p.user_id = $2 RETURNING ${PASSKEY_COLUMNS}`, [c.id, c.userId]);
  return rows[0];
}

/** Stores a challenge, single use until `expiresAt`. */
export async function insertWebauthnChallenge(
  q: Queryable,
  c: { id: string; purpose: 'authentication'; challenge: string; userId: null; tokenHash: string; now: Date; expiresAt: Date },
): Promise<void> {
  await q.query(
    `INSERT INTO webauthn_challenges (id, purpose, challenge, user_id, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [c.id, c.purpose, c.challenge, c.userId, c.tokenHash, c.now, c.expiresAt],
  );
}

/**
 * Stores a registration challenge of `userId` and, in the same statement, deletes the user's
 * older registration challenges beyond the newest `keep - 1`, so that a user has at most `keep`
 * (parallel calls may briefly leave one or two more, which the next call or the purge removes):
 * a registration page that asks again replaces its oldest challenge instead of adding rows.
 * @param c.keep at least 1.
 */
export async function insertRegistrationChallenge(q: Queryable, c: { id: string; challenge: string; userId: string; now: Date; expiresAt: Date; keep: number }): Promise<void> {
  await q.query(
    `WITH stored AS (
       INSERT INTO webauthn_challenges (id, purpose, challenge, user_id, token_hash, created_at, expires_at)
       VALUES ($1, 'registration', $2, $3, NULL, $4, $5) RETURNING id
     )
     DELETE FROM webauthn_challenges AS w
      WHERE w.purpose = 'registration' AND w.user_id = $3
        AND w.id NOT IN (SELECT o.id FROM webauthn_challenges AS o WHERE o.purpose = 'registration' AND o.user_id = $3
                          ORDER BY o.created_at DESC, o.id DESC LIMIT $6)`,
    [c.id, c.challenge, c.userId, c.now, c.expiresAt, c.keep - 1],
  );
}

/**
 * Uses the registration challenge `challenge` of `userId` once: deletes it and reports whether it
 * was live, so of two requests with one challenge at most one gets true.
 */
export async function takeRegistrationChallenge(q: Queryable, c: { userId: string; challenge: string; now: Date }): Promise<boolean> {
  const { rows } = await q.query<{ expires_at: Date }>(
    `DELETE FROM webauthn_challenges WHERE purpose = 'registration' AND user_id = $1 AND challenge = $2 RETURNING expires_at`,
    [c.userId, c.challenge],
  );
  return rows.some((r) => r.expires_at > c.now);
}

/**
 * Uses the sign-in challenge of the cookie whose SHA-256 is `tokenHash` once: deletes it.
 * @returns the challenge while it was live; undefined when unknown, used or expired.
 */
export async function takeAuthenticationChallenge(q: Queryable, c: { tokenHash: string; now: Date }): Promise<string | undefined> {
  const { rows } = await q.query<{ challenge: string; expires_at: Date }>(
    `DELETE FROM webauthn_challenges WHERE purpose = 'authentication' AND token_hash = $1 RETURNING challenge, expires_at`,
    [c.tokenHash],
  );
  const row = rows[0];
  return row !== undefined && row.expires_at > c.now ? row.challenge : undefined;
}
