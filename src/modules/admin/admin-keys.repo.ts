import type { Queryable } from '../../db/db.js';

/** `last_used_at` of an admin API key is written at most once per this many seconds (as a session's, docs/admin-api.md#api-keys). */
export const KEY_LAST_USED_RESOLUTION_SECONDS = 60;

/** An `admin_api_keys` row as the CLI lists it (never the hash). */
export interface AdminKeyRow {
  id: string;
  name: string;
  scopes: string[];
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
}

/** What a request's key check reads (migration 016). */
export interface AdminKeyCheckRow {
  name: string;
  scopes: string[];
  /** SHA-256 of the key's text, base64url. */
  key_hash: string;
  /** The key is revoked, or expired at the time given: it must be refused. */
  dead: boolean;
  /** `last_used_at` is unset or at least {@link KEY_LAST_USED_RESOLUTION_SECONDS} old: call {@link touchAdminKey}. */
  last_use_stale: boolean;
}

/** Stores a new key (its hash only). */
export async function insertAdminKey(
  q: Queryable,
  key: { id: string; name: string; scopes: readonly string[]; keyHash: string; createdAt: Date; expiresAt: Date | null },
): Promise<void> {
  await q.query(
    'INSERT INTO admin_api_keys (id, name, scopes, key_hash, created_at, expires_at) VALUES ($1, $2, $3::text[], $4, $5, $6)',
    [key.id, key.name, [...key.scopes], key.keyHash, key.createdAt, key.expiresAt],
  );
}

/**
 * The key `id` as a request's check needs it, in one primary-key read: its hash, scopes, and
 * whether it is dead (revoked, or expired at `now`) or its use must be recorded, decided in SQL
 * so that no timestamp is parsed on the request path.
 * @returns undefined when there is no such key.
 */
export async function findAdminKeyForCheck(q: Queryable, id: string, now: Date): Promise<AdminKeyCheckRow | undefined> {
  const { rows } = await q.query<AdminKeyCheckRow>(
    `SELECT name, scopes, key_hash,
            (revoked_at IS NOT NULL OR (expires_at IS NOT NULL AND expires_at <= $2::timestamptz)) AS dead,
            (last_used_at IS NULL OR last_used_at <= $2::timestamptz - interval '${KEY_LAST_USED_RESOLUTION_SECONDS} seconds') AS last_use_stale
       FROM admin_api_keys WHERE id = $1`,
    [id, now.toISOString()],
  );
  return rows[0];
}

/**
 * Sets `last_used_at = now` unless it was set within the last {@link KEY_LAST_USED_RESOLUTION_SECONDS}
 * (the condition is in the statement: of parallel requests at most one writes).
 */
export async function touchAdminKey(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query(
    `UPDATE admin_api_keys SET last_used_at = $2
      WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $2::timestamptz - interval '${KEY_LAST_USED_RESOLUTION_SECONDS} seconds')`,
    [id, now.toISOString()],
  );
}

/** Every key, newest first (a deployment has a handful). */
export async function listAdminKeys(q: Queryable): Promise<AdminKeyRow[]> {
  const { rows } = await q.query<AdminKeyRow>(
    'SELECT id, name, scopes, created_at, last_used_at, expires_at, revoked_at FROM admin_api_keys ORDER BY created_at DESC, id DESC',
  );
  return rows;
}

/**
 * Revokes the key `id` if it is not revoked yet.
 * @returns `revoked` when this call revoked it, `already` when it was, undefined when there is no such key.
 */
export async function revokeAdminKey(q: Queryable, id: string, now: Date): Promise<'revoked' | 'already' | undefined> {
  const { rows } = await q.query<{ revoked_now: boolean }>(
    `UPDATE admin_api_keys k SET revoked_at = coalesce(old.revoked_at, $2)
       FROM (SELECT id, revoked_at FROM admin_api_keys WHERE id = $1 FOR UPDATE) old
      WHERE k.id = old.id
     RETURNING old.revoked_at IS NULL AS revoked_now`,
    [id, now],
  );
  const row = rows[0];
  return row === undefined ? undefined : row.revoked_now ? 'revoked' : 'already';
}
