import type { Queryable } from '../../db/db.js';
import { SqlParams } from '../../db/sql-params.js';
import { banInForceSql, type UserRow } from '../users/users.shared.js';
import { forgiveHitsSql } from '../rate-limits/rate-limits.shared.js';
import { eventInsertSql, eventTypeLiteral, sessionRevokedCause } from '../events/events.shared.js';

/** A `sessions` row as the wire Session needs it (docs/api.md#operations), plus the owner. */
export interface SessionRow {
  id: string;
  user_id: string;
  device_id: string | null;
  ip: string | null;
  user_agent: string | null;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date;
}

/** Why a session was revoked; stored in `sessions.revoked_reason` for audits. */
export type RevocationReason = 'logout' | 'revoked_by_user' | 'revoke_all' | 'password_changed' | 'password_reset' | 'refresh_token_reuse' | 'revoked_by_admin' | 'banned';

/** `last_used_at` is written at most once per this many seconds (docs/api.md#refresh-token-rotation). */
export const LAST_USED_RESOLUTION_SECONDS = 60;

const SESSION_COLUMNS = 's.id, s.user_id, s.device_id, s.ip, s.user_agent, s.created_at, s.last_used_at, s.expires_at';

/**
 * Creates the records of a sign-in (docs/api.md#operations: device and session records; the session is the
 * refresh token family, docs/api.md#refresh-token-rotation) in one statement: a device, a session and the family's
 * first refresh token, but only while the user's `password_version` is still
 * `checkedPasswordVersion`, the version whose hash was verified (or, for a passkey, read with the
 * passkey): a re-hash of the same password does not change it, a change or reset does. The
 * statement sets the user's `last_sign_in_at`, which locks the user row until it commits, so a
 * parallel password change (which replaces the hash and then revokes every
 * session of the user) either waits for this statement and revokes the new session too, or
 * commits first, and then the version no longer matches and nothing is created. A ban in force
 * at `now` refuses it the same way, and a ban committed meanwhile revokes it (`banUser`).
 * The same statement takes back the sign-in's rate-limit hits (`forgiveRateLimitKeys`
 * point 1: only failures count), only when the session is created, so a sign-in is two commits
 * (its counts and this) rather than 2n + 3 for n identifiers (docs/performance.md), and records
 * the `session.created` event (docs/api.md#event-types) with the session: one more INSERT in the
 * same round trip.
 * @returns false when the password changed since it was checked or the user is banned; nothing was created, forgiven or recorded then.
 */
export async function createSignInSession(
  q: Queryable,
  s: {
    sessionId: string;
    deviceId: string;
    userId: string;
    checkedPasswordVersion: number;
    ip: string | null;
    userAgent: string | null;
    now: Date;
    expiresAt: Date;
    refreshToken: { id: string; tokenHash: string };
    forgiveRateLimitKeys: readonly string[];
    /** How the sign-in was authenticated (RFC 8176), kept on the session. */
    amr: readonly string[];
  },
): Promise<boolean> {
  const p = new SqlParams();
  const $now = p.add(s.now);
  const $userId = p.add(s.userId);
  const $checkedVersion = p.add(s.checkedPasswordVersion);
  const $forgiveKeys = p.add([...s.forgiveRateLimitKeys]);
  const $deviceId = p.add(s.deviceId);
  const $ip = p.add(s.ip);
  const $userAgent = p.add(s.userAgent);
  const $sessionId = p.add(s.sessionId);
  const $expiresAt = p.add(s.expiresAt);
  const $amr = p.add([...s.amr]);
  const $tokenId = p.add(s.refreshToken.id);
  const $tokenHash = p.add(s.refreshToken.tokenHash);
  const { rowCount } = await q.query(
    `WITH checked AS (
       UPDATE users SET last_sign_in_at = ${$now}
        WHERE id = ${$userId} AND password_version = ${$checkedVersion} AND NOT ${banInForceSql('users', `${$now}::timestamptz`)} RETURNING id
     ), forgiven AS (
       ${forgiveHitsSql($forgiveKeys, 'EXISTS (SELECT 1 FROM checked)')}
     ), d AS (
       INSERT INTO devices (id, user_id, ip, user_agent, created_at) SELECT ${$deviceId}, checked.id, ${$ip}, ${$userAgent}, ${$now} FROM checked RETURNING id, user_id
     ), s AS (
       INSERT INTO sessions (id, user_id, device_id, ip, user_agent, created_at, last_used_at, expires_at, amr)
       SELECT ${$sessionId}, d.user_id, d.id, ${$ip}, ${$userAgent}, ${$now}, ${$now}, ${$expiresAt}, ${$amr}::text[] FROM d RETURNING id, user_id
     ), created AS (
       ${eventInsertSql({
         from: 's',
         type: eventTypeLiteral('session.created'),
         data: `json_build_object('user_id', s.user_id, 'session_id', s.id, 'amr', ${$amr}::text[], 'ip', ${$ip}::text, 'user_agent', ${$userAgent}::text)`,
         at: `${$now}::timestamptz`,
       })}
     )
     INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at, format) SELECT ${$tokenId}, s.id, ${$tokenHash}, NULL, ${$now}, 2 FROM s`,
    p.values,
  );
  return rowCount === 1;
}

/** What a Bearer request learns of its session (docs/api.md#bearer-authentication): the id, its user, and whether its use must be recorded. */
export interface ActiveSession {
  readonly sessionId: string;
  readonly user: UserRow;
  /** `last_used_at` is unset or at least {@link LAST_USED_RESOLUTION_SECONDS} old at `now`: call {@link touchSession}. */
  readonly lastUseStale: boolean;
}

/**
 * The active (unrevoked, unexpired at `now`) session `sessionId` of user `userId`, not banned at
 * `now`, with the user, in one indexed round trip; undefined when any condition fails (docs/api.md#bearer-authentication). Reads
 * only what a Bearer request needs: no timestamp leaves the database (the staleness of
 * `last_used_at` is decided in SQL), so none is parsed on the hot path (docs/performance.md).
 */
export async function findActiveSessionWithUser(q: Queryable, sessionId: string, userId: string, now: Date): Promise<ActiveSession | undefined> {
  // The resolution is a constant of the statement's text and `now` is sent as ISO 8601 text:
  // PostgreSQL spent about 6 µs more per statement on a `make_interval` of a parameter
  // (docs/performance.md), and pg formats a Date in JavaScript, slower than `toISOString`.
  const { rows } = await q.query<UserRow & { last_use_stale: boolean }>(
    `SELECT u.id, u.username, u.email, u.phone, u.password_hash, u.password_version, u.is_email_verified, u.is_phone_verified,
            (s.last_used_at IS NULL OR s.last_used_at <= $3::timestamptz - interval '${LAST_USED_RESOLUTION_SECONDS} seconds') AS last_use_stale
       FROM sessions s JOIN users u ON u.id = s.user_id
      WHERE s.id = $1 AND s.user_id = $2 AND s.revoked_at IS NULL AND s.expires_at > $3 AND NOT ${banInForceSql('u', '$3::timestamptz')}`,
    [sessionId, userId, now.toISOString()],
  );
  const r = rows[0];
  if (r === undefined) return undefined;
  return {
    sessionId,
    user: {
      id: r.id,
      username: r.username,
      email: r.email,
      phone: r.phone,
      password_hash: r.password_hash,
      password_version: r.password_version,
      is_email_verified: r.is_email_verified,
      is_phone_verified: r.is_phone_verified,
    },
    lastUseStale: r.last_use_stale,
  };
}

/** Sets `last_used_at = now` unless it was set within the last {@link LAST_USED_RESOLUTION_SECONDS}. */
export async function touchSession(q: Queryable, sessionId: string, now: Date): Promise<void> {
  await q.query(
    `UPDATE sessions SET last_used_at = $2
      WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $2::timestamptz - make_interval(secs => $3))`,
    [sessionId, now, LAST_USED_RESOLUTION_SECONDS],
  );
}

/** Active sessions of a user, oldest first (docs/api.md#refresh-token-rotation: only unrevoked, unexpired ones). */
export async function listActiveSessions(q: Queryable, userId: string, now: Date): Promise<SessionRow[]> {
  const { rows } = await q.query<SessionRow>(
    `SELECT ${SESSION_COLUMNS} FROM sessions s
      WHERE s.user_id = $1 AND s.revoked_at IS NULL AND s.expires_at > $2
      ORDER BY s.created_at, s.id`,
    [userId, now],
  );
  return rows;
}

/**
 * Whether session `sessionId` was created (signed in, by any method; refreshes keep the
 * session) at or after `since`, by its primary key (docs/api.md#recent-sign-in).
 */
export async function sessionSignedInSince(q: Queryable, sessionId: string, since: Date): Promise<boolean> {
  const { rows } = await q.query<{ recent: boolean }>('SELECT created_at >= $2 AS recent FROM sessions WHERE id = $1', [sessionId, since]);
  return rows[0]?.recent === true;
}

/** The owner of a session (revoked or not), or undefined when it does not exist. */
export async function findSessionOwner(q: Queryable, sessionId: string): Promise<string | undefined> {
  const { rows } = await q.query<{ user_id: string }>('SELECT user_id FROM sessions WHERE id = $1', [sessionId]);
  return rows[0]?.user_id;
}

/**
 * The statement that revokes the unrevoked sessions matching `where` (SQL over `sessions`, with
 * `$1` the instant and `$2` the stored reason) and records one `session.revoked` event per
 * session it revoked, with `$3` as the cause (docs/api.md#event-types): one round trip, and the
 * events commit with the revocation. Its row count is the number of sessions revoked.
 */
function revokingSql(where: string): string {
  return `WITH revoked AS (
       UPDATE sessions SET revoked_at = $1, revoked_reason = $2 WHERE revoked_at IS NULL AND ${where} RETURNING id, user_id
     ) ${eventInsertSql({
       from: 'revoked',
       type: eventTypeLiteral('session.revoked'),
       data: "json_build_object('user_id', revoked.user_id, 'session_id', revoked.id, 'cause', $3::text)",
       at: '$1::timestamptz',
     })}`;
}

/**
 * Revokes (soft: sets `revoked_at`) one session if it is not revoked yet, with its
 * `session.revoked` event. Idempotent.
 * @returns true when this call revoked it.
 */
export async function revokeSession(q: Queryable, sessionId: string, reason: RevocationReason, now: Date): Promise<boolean> {
  const { rowCount } = await q.query(revokingSql('id = $4'), [now, reason, sessionRevokedCause(reason), sessionId]);
  return rowCount === 1;
}

/**
 * Revokes every unrevoked session of a user, each with its `session.revoked` event.
 * @returns the number of sessions this call revoked.
 */
export async function revokeAllSessions(q: Queryable, userId: string, reason: RevocationReason, now: Date): Promise<number> {
  const { rowCount } = await q.query(revokingSql('user_id = $4'), [now, reason, sessionRevokedCause(reason), userId]);
  return rowCount;
}

/**
 * Revokes every active (unrevoked, unexpired at `now`) session of a user, for example by an
 * operator (`latchkey sessions revoke`), each with its `session.revoked` event. Expired sessions
 * are left as they are: they are already unusable. Idempotent: a second call revokes nothing.
 * @returns the number of sessions this call revoked (0 when the user has none or does not exist).
 */
export async function revokeActiveSessions(q: Queryable, userId: string, reason: RevocationReason, now: Date): Promise<number> {
  const { rowCount } = await q.query(revokingSql('user_id = $4 AND expires_at > $1'), [now, reason, sessionRevokedCause(reason), userId]);
  return rowCount;
}
