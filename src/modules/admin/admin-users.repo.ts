import { constraintName, sqlState, UNIQUE_VIOLATION, type Queryable } from '../../db/db.js';
import { AppError } from '../../errors.js';
import { UUID_PATTERN } from '../tokens/access-token.service.js';
import { keysetTimeSql, type KeysetPosition } from './keyset-cursor.js';

/** A user as the admin API shows it (docs/admin-api.md#adminuser), before the ban in force is worked out. */
export interface AdminUserRow {
  id: string;
  username: string;
  email: string | null;
  phone: string | null;
  is_email_verified: boolean;
  is_phone_verified: boolean;
  created_at: Date;
  last_sign_in_at: Date | null;
  has_password: boolean;
  mfa_enabled: boolean;
  /** How many passkeys the user has. */
  passkeys: number;
  /** The user's identities at identity providers, oldest first. */
  identities: { provider: string; email: string | null }[];
  banned_at: Date | null;
  banned_until: Date | null;
  ban_reason: string | null;
  /** `created_at` to the microsecond, for the listing's cursor. */
  cursor_at: string;
}

/**
 * The columns of an {@link AdminUserRow} over `users u`: the second factor by primary key of
 * `mfa_totp`, the passkeys counted under `passkeys_user_idx`, the identities read under
 * `user_identities_user_idx`.
 */
const ADMIN_USER_COLUMNS = `u.id, u.username, u.email, u.phone, u.is_email_verified, u.is_phone_verified, u.created_at, u.last_sign_in_at,
       u.password_hash IS NOT NULL AS has_password,
       EXISTS (SELECT 1 FROM mfa_totp m WHERE m.user_id = u.id AND m.enabled_at IS NOT NULL) AS mfa_enabled,
       (SELECT count(*) FROM passkeys p WHERE p.user_id = u.id)::int AS passkeys,
       (SELECT coalesce(json_agg(json_build_object('provider', i.provider, 'email', i.email) ORDER BY i.created_at), '[]'::json)
          FROM user_identities i WHERE i.user_id = u.id) AS identities,
       u.banned_at, u.banned_until, u.ban_reason, ${keysetTimeSql('u.created_at')} AS cursor_at`;

/** The user `id` as the admin API shows it, or undefined. One primary-key read (and two index probes). */
export async function findAdminUser(q: Queryable, id: string): Promise<AdminUserRow | undefined> {
  const { rows } = await q.query<AdminUserRow>(`SELECT ${ADMIN_USER_COLUMNS} FROM users u WHERE u.id = $1`, [id]);
  return rows[0];
}

/** `text` as a LIKE pattern that matches it as a prefix: its `\`, `%` and `_` escaped, then `%`. */
export function likePrefix(text: string): string {
  return `${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** A username can only start with these (migration 001: `^[a-z0-9_]{3,32}$`). */
const USERNAME_PREFIX = /^[a-z0-9_]{1,32}$/;
/** A stored phone can only start with these (`^[+][0-9]{8,15}$`). */
const PHONE_PREFIX = /^\+[0-9]{0,15}$/;

/**
 * The SQL of the listing's `query` (docs/admin-api.md#list-users): the users whose id is
 * `query` (when it is a UUID), or whose username or email starts with it case-insensitively
 * (both are stored lower-case), or whose stored phone starts with it. One branch per way of
 * matching, each read by its own index of migration 018 (`LIKE 'prefix%'` on a
 * `text_pattern_ops` column) within the keyset and stopped after a page; a branch the query
 * cannot match (a username prefix with `@`) is left out of the statement. Parameters: `$1`
 * the keyset time, `$2` the keyset id, `$3` the page size, `$4` the pattern, `$5` the id.
 */
function matchingIdsSql(query: string): string {
  const lower = query.toLowerCase();
  const keyset = '(created_at, id) < ($1::timestamptz, $2::uuid)';
  const page = 'ORDER BY created_at DESC, id DESC LIMIT $3';
  const branches = [
    ...(UUID_PATTERN.test(query) ? [`SELECT id, created_at FROM users WHERE id = $5::uuid AND ${keyset}`] : []),
    ...(USERNAME_PREFIX.test(lower) ? [`(SELECT id, created_at FROM users WHERE username LIKE $4 AND ${keyset} ${page})`] : []),
    `(SELECT id, created_at FROM users WHERE email LIKE $4 AND ${keyset} ${page})`,
    ...(PHONE_PREFIX.test(query) ? [`(SELECT id, created_at FROM users WHERE phone LIKE $4 AND ${keyset} ${page})`] : []),
  ];
  // UNION, not UNION ALL: a user whose username and email both match is one item.
  return `SELECT id, created_at FROM (${branches.join(' UNION ')}) matched ${page}`;
}

/**
 * One page of users newest first, strictly below `after` in `(created_at, id)` order, at most
 * `limit`, all of them or those `query` matches ({@link matchingIdsSql}). Without `query`: one
 * backward range scan of `users_created_id_idx`. No OFFSET and no count: the cost is a page's,
 * whatever the table's size.
 */
export async function listAdminUsers(q: Queryable, c: { query: string | undefined; after: KeysetPosition; limit: number }): Promise<AdminUserRow[]> {
  const params: unknown[] = [c.after.at, c.after.id, c.limit];
  let ids = `SELECT id, created_at FROM users WHERE (created_at, id) < ($1::timestamptz, $2::uuid) ORDER BY created_at DESC, id DESC LIMIT $3`;
  if (c.query !== undefined) {
    const lower = c.query.toLowerCase();
    params.push(likePrefix(lower));
    // $5 only when the statement names it (a UUID query): a parameter the statement does not use is an error.
    if (UUID_PATTERN.test(c.query)) params.push(lower);
    ids = matchingIdsSql(c.query);
  }
  const { rows } = await q.query<AdminUserRow>(
    `WITH page AS MATERIALIZED (${ids})
     SELECT ${ADMIN_USER_COLUMNS} FROM page JOIN users u ON u.id = page.id
      ORDER BY u.created_at DESC, u.id DESC`,
    params,
  );
  return rows;
}

/** The members of a user an operator may change (docs/admin-api.md#update-a-user), as stored. */
export interface UserIdentityFields {
  username: string;
  email: string | null;
  phone: string | null;
  is_email_verified: boolean;
  is_phone_verified: boolean;
}

/** Unique index -> the admin API's 409 code it means. */
const ADMIN_TAKEN_BY_CONSTRAINT = {
  users_username_key: 'admin.username_taken',
  users_email_key: 'admin.email_taken',
  users_phone_key: 'admin.phone_taken',
} as const;

/** The admin API's 409 code of a unique violation of `users`, if `err` is one. */
export function adminTakenCode(err: unknown): (typeof ADMIN_TAKEN_BY_CONSTRAINT)[keyof typeof ADMIN_TAKEN_BY_CONSTRAINT] | undefined {
  if (sqlState(err) !== UNIQUE_VIOLATION) return undefined;
  return ADMIN_TAKEN_BY_CONSTRAINT[constraintName(err) as keyof typeof ADMIN_TAKEN_BY_CONSTRAINT];
}

/**
 * Replaces the identifiers and verification flags of user `id` (already normalised and checked
 * by the caller). The unique indexes decide races with sign-ups and other changes.
 * @returns false when there is no such user.
 * @throws AppError `admin.{username,email,phone}_taken` (409) when another user has one of them.
 */
export async function updateUserIdentity(q: Queryable, id: string, fields: UserIdentityFields, now: Date): Promise<boolean> {
  try {
    const { rowCount } = await q.query(
      `UPDATE users SET username = $2, email = $3, phone = $4, is_email_verified = $5, is_phone_verified = $6, updated_at = $7 WHERE id = $1`,
      [id, fields.username, fields.email, fields.phone, fields.is_email_verified, fields.is_phone_verified, now],
    );
    return rowCount === 1;
  } catch (err) {
    const taken = adminTakenCode(err);
    if (taken !== undefined) throw new AppError(taken, { cause: err });
    throw err;
  }
}
