import { AppError } from '../../errors.js';
import { constraintName, sqlState, UNIQUE_VIOLATION, type Queryable } from '../../db/db.js';
import type { SqlParams } from '../../db/sql-params.js';

/** A `users` row as stored. Wire fields (docs/api.md#operations User) keep their column names. */
export interface UserRow {
  id: string;
  username: string;
  email: string | null;
  phone: string | null;
  /** The argon2id hash (PHC string), or null for a user created without a password (docs/api.md, admin API). */
  password_hash: string | null;
  /**
   * 1 at sign-up, one more at each change or reset of the password; unchanged by a re-hash of
   * the same password (migration 011). What "the password did not change since it was checked"
   * compares.
   */
  password_version: number;
  is_email_verified: boolean;
  is_phone_verified: boolean;
}

/** The columns of a {@link UserRow}, in SELECT lists. */
export const USER_COLUMNS = 'id, username, email, phone, password_hash, password_version, is_email_verified, is_phone_verified';

/** Unique index -> the 409 code it means (docs/api.md#error-codes). */
const TAKEN_BY_CONSTRAINT = {
  users_username_key: 'auth.sign_up.username_taken',
  users_email_key: 'auth.sign_up.email_taken',
  users_phone_key: 'auth.sign_up.phone_taken',
} as const;

/**
 * Inserts a user, its email unverified unless `is_email_verified` says otherwise (a user an
 * identity provider vouched for, or one the admin API creates). The unique indexes decide races:
 * of parallel sign-ups with one username, exactly one insert succeeds.
 * @throws AppError `auth.sign_up.{username,email,phone}_taken` (409) on a unique violation.
 */
export async function insertUser(
  q: Queryable,
  user: Omit<UserRow, 'is_email_verified' | 'is_phone_verified' | 'password_version'> & { is_email_verified?: boolean },
  now: Date,
): Promise<UserRow> {
  try {
    const { rows } = await q.query<UserRow>(
      `INSERT INTO users (id, username, email, phone, password_hash, is_email_verified, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $7, $6, $6) RETURNING ${USER_COLUMNS}`,
      [user.id, user.username, user.email, user.phone, user.password_hash, now, user.is_email_verified ?? false],
    );
    return rows[0]!;
  } catch (err) {
    const taken = TAKEN_BY_CONSTRAINT[constraintName(err) as keyof typeof TAKEN_BY_CONSTRAINT];
    if (sqlState(err) === UNIQUE_VIOLATION && taken !== undefined) throw new AppError(taken, { cause: err });
    throw err;
  }
}

/** Which of the unique identifiers are already taken, in the catalog's order (username, email, phone). */
export async function findTakenIdentifier(
  q: Queryable,
  ids: { username: string; email: string | null; phone: string | null },
): Promise<'username' | 'email' | 'phone' | undefined> {
  const { rows } = await q.query<{ username: boolean; email: boolean; phone: boolean }>(
    `SELECT bool_or(username = $1) AS username, bool_or(email = $2) AS email, bool_or(phone = $3) AS phone
       FROM users WHERE username = $1 OR email = $2 OR phone = $3`,
    [ids.username, ids.email, ids.phone],
  );
  const row = rows[0];
  if (row?.username) return 'username';
  if (row?.email) return 'email';
  if (row?.phone) return 'phone';
  return undefined;
}

/**
 * The columns of a user as a sign-in needs them (a {@link UserRow}, its ban, and whether a second
 * factor is on), for a SELECT in which `users` is visible under that name (alone, or joined).
 */
export const SIGN_IN_USER_COLUMNS = `${USER_COLUMNS.split(', ').map((c) => `users.${c}`).join(', ')}, users.banned_at, users.banned_until,
  EXISTS (SELECT 1 FROM mfa_totp m WHERE m.user_id = users.id AND m.enabled_at IS NOT NULL) AS mfa_enabled`;

/** A user as a sign-in checks it: the row, its ban, and whether a second factor is on. */
export type SignInUser = UserRow & Pick<BanState, 'banned_at' | 'banned_until'> & { mfa_enabled: boolean };

/** The user with this id as a sign-in checks it ({@link SignInUser}), or undefined. */
export async function findSignInUser(q: Queryable, id: string): Promise<SignInUser | undefined> {
  const { rows } = await q.query<SignInUser>(`SELECT ${SIGN_IN_USER_COLUMNS} FROM users WHERE id = $1`, [id]);
  return rows[0];
}

/**
 * The SELECT of every user named by any of the given (already normalised) identifiers (at most
 * three rows; undefined identifiers match nothing) as a sign-in checks them ({@link SignInUser}),
 * its parameters added to `p`, for a statement that runs it along with other work: sign-in
 * counts its attempt and looks its user up in one round trip (sign-in.repo.ts).
 */
export function signInUsersByIdentifiersSql(
  p: SqlParams,
  ids: { username?: string | undefined; email?: string | undefined; phone?: string | undefined },
): string {
  const $username = p.add(ids.username ?? null);
  const $email = p.add(ids.email ?? null);
  const $phone = p.add(ids.phone ?? null);
  return `SELECT ${SIGN_IN_USER_COLUMNS} FROM users WHERE username = ${$username}::text OR email = ${$email}::text OR phone = ${$phone}::text`;
}

/** The user with this (normalised) email, or undefined. */
export async function findUserByEmail(q: Queryable, email: string): Promise<UserRow | undefined> {
  const { rows } = await q.query<UserRow>(`SELECT ${USER_COLUMNS} FROM users WHERE email = $1`, [email]);
  return rows[0];
}

/**
 * Locks the user row `FOR UPDATE` until the transaction ends. Transactions that change a user
 * and its codes take the user row first, then the codes, so they never deadlock one another.
 * @returns false when there is no such user.
 */
export async function lockUser(q: Queryable, id: string): Promise<boolean> {
  const { rows } = await q.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [id]);
  return rows.length === 1;
}

/** {@link lockUser} that also returns the row as it is now; undefined when there is no such user. */
export async function lockUserRow(q: Queryable, id: string): Promise<UserRow | undefined> {
  const { rows } = await q.query<UserRow>(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1 FOR UPDATE`, [id]);
  return rows[0];
}

/**
 * Replaces the user's email with `email`, verified (a code sent to it was confirmed,
 * docs/api.md#confirm-an-email-change). The unique index decides races: of two users confirming
 * one address, one update succeeds and the other waits for its commit, then fails.
 * @returns the updated row, or undefined when there is no such user.
 * @throws AppError `auth.change_email.email_taken` (409) when another user has the address.
 */
export async function replaceEmail(q: Queryable, userId: string, email: string, now: Date): Promise<UserRow | undefined> {
  try {
    const { rows } = await q.query<UserRow>(
      `UPDATE users SET email = $2, is_email_verified = true, updated_at = $3 WHERE id = $1 RETURNING ${USER_COLUMNS}`,
      [userId, email, now],
    );
    return rows[0];
  } catch (err) {
    if (sqlState(err) === UNIQUE_VIOLATION && constraintName(err) === 'users_email_key') throw new AppError('auth.change_email.email_taken', { cause: err });
    throw err;
  }
}

/** The user with this id, or undefined. */
export async function findUserById(q: Queryable, id: string): Promise<UserRow | undefined> {
  const { rows } = await q.query<UserRow>(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [id]);
  return rows[0];
}

/**
 * Replaces the password (a change) only if its version is still `expectedVersion`, the one whose
 * hash was verified, so that of two parallel password changes exactly one wins, while a re-hash
 * of the same password by a parallel sign-in ({@link upgradePasswordHash}) does not refuse it.
 * Raises `password_version`.
 * @returns true when this call replaced it.
 */
export async function replacePasswordHash(
  q: Queryable,
  userId: string,
  change: { expectedVersion: number; newHash: string },
  now: Date,
): Promise<boolean> {
  const { rowCount } = await q.query(
    'UPDATE users SET password_hash = $3, password_version = password_version + 1, updated_at = $4 WHERE id = $1 AND password_version = $2',
    [userId, change.expectedVersion, change.newHash, now],
  );
  return rowCount === 1;
}

/**
 * Sets the first password of a user who has none (docs/api.md#set-a-password), only while it
 * still has none: of two parallel requests exactly one sets it. Raises `password_version`.
 * @returns the user as updated, or undefined when it has a password (or does not exist).
 */
export async function setFirstPasswordHash(q: Queryable, userId: string, newHash: string, now: Date): Promise<UserRow | undefined> {
  const { rows } = await q.query<UserRow>(
    `UPDATE users SET password_hash = $2, password_version = password_version + 1, updated_at = $3
      WHERE id = $1 AND password_hash IS NULL RETURNING ${USER_COLUMNS}`,
    [userId, newHash, now],
  );
  return rows[0];
}

/**
 * Sets the password hash whatever it was (a password reset: the code, not the old password,
 * proved the right to change it), and raises `password_version`. Takes the user row's lock, so a parallel sign-in's
 * `createSignInSession` either commits first (and the reset then revokes its session) or finds
 * the hash changed.
 * @returns true when the user exists.
 */
export async function setPasswordHash(q: Queryable, userId: string, newHash: string, now: Date): Promise<boolean> {
  const { rowCount } = await q.query('UPDATE users SET password_hash = $2, password_version = password_version + 1, updated_at = $3 WHERE id = $1', [
    userId,
    newHash,
    now,
  ]);
  return rowCount === 1;
}

/**
 * Stores a re-hash of the user's unchanged password (made because
 * `PasswordHasher.needsRehash` said the stored one has weaker argon2id parameters than
 * configured), only if the stored hash is still `expectedHash`: a parallel password change or
 * another upgrade wins, and this one is then simply dropped. Unlike a password change it revokes
 * nothing and leaves `password_version` as it is, since the password is the same: a session,
 * second sign-in step or passkey sign-in that checked the old hash still goes through.
 *
 * Make the new hash outside any transaction (argon2id must not run while row locks are held),
 * for example after the sign-in transaction committed.
 * @returns true when this call replaced the hash; false is not an error.
 */
export async function upgradePasswordHash(
  q: Queryable,
  userId: string,
  upgrade: { expectedHash: string; newHash: string },
  now: Date,
): Promise<boolean> {
  // password_rehashed_at marks the new hash as a re-hash: the version rule of migration 011 then leaves password_version as it is.
  const { rowCount } = await q.query('UPDATE users SET password_hash = $3, password_rehashed_at = $4, updated_at = $4 WHERE id = $1 AND password_hash = $2', [
    userId,
    upgrade.expectedHash,
    upgrade.newHash,
    now,
  ]);
  return rowCount === 1;
}

/**
 * Marks the email verified if the user still has that email.
 * @returns the user as it is now when the flag changed from false to true; undefined otherwise.
 */
export async function markEmailVerified(q: Queryable, userId: string, email: string, now: Date): Promise<UserRow | undefined> {
  const { rows } = await q.query<UserRow>(
    `UPDATE users SET is_email_verified = true, updated_at = $3
      WHERE id = $1 AND email = $2 AND NOT is_email_verified RETURNING ${USER_COLUMNS}`,
    [userId, email, now],
  );
  return rows[0];
}

/** The user with this (normalised, lower-case) username, or undefined. */
export async function findUserByUsername(q: Queryable, username: string): Promise<UserRow | undefined> {
  const { rows } = await q.query<UserRow>(`SELECT ${USER_COLUMNS} FROM users WHERE username = $1`, [username]);
  return rows[0];
}

/** The ban in force on a user, as the admin API shows it (docs/api.md, admin API: "Bans"). */
export interface BanState {
  /** When the ban began; null when no ban was ever set or the last one was lifted. */
  banned_at: Date | null;
  /** When it ends; null with `banned_at` set: indefinite. */
  banned_until: Date | null;
  ban_reason: string | null;
}

/**
 * Whether a ban is in force at `now`: set, and indefinite or not yet ended. The same rule as
 * {@link BAN_IN_FORCE_SQL}.
 */
export function banInForce(user: Pick<BanState, 'banned_at' | 'banned_until'>, now: Date): boolean {
  return user.banned_at !== null && (user.banned_until === null || user.banned_until.getTime() > now.getTime());
}

/**
 * The SQL condition "a ban is in force on the row aliased `alias` at the timestamptz `nowSql`",
 * for the statements that create a session or check a Bearer token: a ban costs them no round
 * trip. The same rule as {@link banInForce}.
 */
export function banInForceSql(alias: string, nowSql: string): string {
  return `(${alias}.banned_at IS NOT NULL AND (${alias}.banned_until IS NULL OR ${alias}.banned_until > ${nowSql}))`;
}

/**
 * Sets a ban on a user (docs/api.md, admin API: "Bans"): a new one replaces the one in force. The
 * first statement of `banUser` (users.service.ts), which then revokes the user's sessions in the
 * same transaction.
 * @param ban `until`: when it ends (must be after `now`; the caller checks), or null: indefinite.
 * @returns the ban as stored, or undefined when there is no such user.
 */
export async function setBan(q: Queryable, userId: string, ban: { until: Date | null; reason: string | null }, now: Date): Promise<BanState | undefined> {
  const { rows } = await q.query<BanState>(
    `UPDATE users SET banned_at = $2, banned_until = $3, ban_reason = $4, updated_at = $2 WHERE id = $1
     RETURNING banned_at, banned_until, ban_reason`,
    [userId, now, ban.until, ban.reason],
  );
  return rows[0];
}

/**
 * Lifts the ban in force on a user (docs/api.md, admin API: "Bans"). The sessions the ban revoked
 * stay revoked. A ban that has already run out is cleared too, but does not count as lifted.
 * @returns `lifted`: a ban was in force at `now` and this call ended it; undefined when there is no such user.
 */
export async function unbanUser(q: Queryable, userId: string, now: Date): Promise<{ lifted: boolean } | undefined> {
  const { rows } = await q.query<{ was_in_force: boolean }>(
    `UPDATE users u SET banned_at = NULL, banned_until = NULL, ban_reason = NULL,
            updated_at = CASE WHEN old.banned_at IS NULL THEN u.updated_at ELSE $2 END
       FROM (SELECT id, banned_at, banned_until FROM users WHERE id = $1 FOR UPDATE) old
      WHERE u.id = old.id
     RETURNING ${banInForceSql('old', '$2')} AS was_in_force`,
    [userId, now],
  );
  const row = rows[0];
  return row === undefined ? undefined : { lifted: row.was_in_force };
}

/** The ban columns of a user ({@link BanState}), or undefined when there is no such user. */
export async function findUserBan(q: Queryable, userId: string): Promise<BanState | undefined> {
  const { rows } = await q.query<BanState>('SELECT banned_at, banned_until, ban_reason FROM users WHERE id = $1', [userId]);
  return rows[0];
}
