import { AppError } from '../../errors.js';
import { constantTimeEqual, decodeCanonicalBase64url, hmacSha256 } from '../../crypto/secrets.js';
import { UUID_PATTERN } from '../tokens/access-token.service.js';

/**
 * Where a page of a listing newest first ended: the last item's time and id, the keyset
 * `(time, id)` the next page continues below (docs/admin-api.md#pagination). `at` is the time
 * as PostgreSQL keeps it, to the microsecond, in UTC ({@link KEYSET_TIME_SQL}), so a page
 * boundary never falls between two items of one millisecond.
 */
export interface KeysetPosition {
  readonly at: string;
  readonly id: string;
}

/** The listings a cursor may belong to: a cursor of one is refused by the other. */
export type CursorKind = 'users' | 'audit';

/** SQL that renders a timestamptz column as {@link KeysetPosition.at}: `2025-01-15T09:30:00.123456Z`. */
export function keysetTimeSql(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

/** The form of {@link KeysetPosition.at}. */
const KEYSET_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** The position before the newest item of any listing: later than every time, above every id. */
export const KEYSET_START: KeysetPosition = Object.freeze({ at: 'infinity', id: 'ffffffff-ffff-ffff-ffff-ffffffffffff' });

/**
 * The opaque cursor of a position: base64url of `[kind, at, id]` as JSON, `.`, and the
 * HMAC-SHA-256 of both under the service's cursor key, so that only cursors the service issued
 * are accepted ({@link decodeCursor}).
 */
export function encodeCursor(key: Buffer, kind: CursorKind, position: KeysetPosition): string {
  const payload = Buffer.from(JSON.stringify([kind, position.at, position.id]), 'utf8').toString('base64url');
  return `${payload}.${hmacSha256(key, payload)}`;
}

/**
 * The position a cursor of `kind` names, if the service issued it under `key` (its MAC
 * checks out, compared in constant time) for that listing; undefined for anything else.
 */
export function decodeCursor(key: Buffer, kind: CursorKind, cursor: string): KeysetPosition | undefined {
  const [payload, mac, ...rest] = cursor.split('.');
  if (payload === undefined || mac === undefined || rest.length > 0 || !constantTimeEqual(hmacSha256(key, payload), mac)) return undefined;
  const bytes = decodeCanonicalBase64url(payload);
  if (bytes === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 3) return undefined;
  const [k, at, id] = parsed as unknown[];
  if (k !== kind || typeof at !== 'string' || !KEYSET_TIME.test(at) || typeof id !== 'string' || !UUID_PATTERN.test(id)) return undefined;
  return { at, id };
}

/**
 * Where a listing of `kind` continues: after `cursor`, or from the start when there is none.
 * @throws AppError `admin.validation_failed` (400) for a cursor the service did not issue for this listing.
 */
export function positionAfter(key: Buffer, kind: CursorKind, cursor: string | undefined): KeysetPosition {
  if (cursor === undefined) return KEYSET_START;
  const position = decodeCursor(key, kind, cursor);
  if (position === undefined) throw new AppError('admin.validation_failed', { message: 'cursor must be a next_cursor the service returned for this listing.' });
  return position;
}

/**
 * A page of a listing read with one item more than `limit` (`rows`): the first `limit` items,
 * and the cursor after the last of them, null exactly when no item follows it.
 */
export function pageOf<R extends { readonly id: string; readonly cursor_at: string }>(
  key: Buffer,
  kind: CursorKind,
  rows: readonly R[],
  limit: number,
): { items: R[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last !== undefined ? encodeCursor(key, kind, { at: last.cursor_at, id: last.id }) : null };
}
