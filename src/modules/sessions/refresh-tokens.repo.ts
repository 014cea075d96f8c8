import type { Queryable } from '../../db/db.js';
import type { PresentedRefreshToken } from '../../crypto/refresh-token.js';

/**
 * The least lifetime a session must have left for a refresh to succeed: the refresh cookie's
 * `Max-Age` is the session's remaining lifetime in whole seconds, and a cookie with `Max-Age=0`
 * is the clearing cookie (RFC 6265 §5.2.2), so a refresh in a session's last second would hand
 * out a token the browser drops at once. Such a refresh is `auth.invalid_refresh_token` instead
 * (docs/decisions.md).
 */
export const MIN_SESSION_LIFETIME_SECONDS = 1;

/**
 * The one liveness rule of a refresh token family (docs/api.md#refresh-token-rotation), as an
 * SQL condition: the session `s` is not revoked and has at least
 * {@link MIN_SESSION_LIFETIME_SECONDS} left at `now` (an SQL expression of type timestamptz).
 * Both the one-statement rotation and the locking transaction decide with it; nothing decides
 * it again in TypeScript.
 */
function familyLiveSql(s: string, now: string): string {
  return `(${s}.revoked_at IS NULL AND ${s}.expires_at >= ${now} + interval '${MIN_SESSION_LIFETIME_SECONDS} second')`;
}

/**
 * The row of a presented refresh token, as an SQL condition on the alias `rt`
 * (docs/api.md#refresh-token-format): a token of the current format (2) by its id and its hash,
 * through the primary key; one of format 1 by its hash alone, through the partial unique index
 * `refresh_tokens_format_1_hash_key` (migration 020), whose predicate the condition repeats so
 * that the planner can use it.
 * @param byId whether the token names its row (`PresentedRefreshToken.id` is set).
 * @param $hash the parameter of the token's hash; `$id`, of its id (read only when `byId`).
 */
function presentedTokenSql(byId: boolean, $hash: string, $id: string): string {
  return byId ? `rt.id = ${$id}::uuid AND rt.token_hash = ${$hash} AND rt.format = 2` : `rt.token_hash = ${$hash} AND rt.format = 1`;
}

/** A refresh token row locked for rotation, with the state of its family (session). */
export interface LockedRefreshToken {
  id: string;
  session_id: string;
  user_id: string;
  /** When the token was replaced; written once by the rotation, never updated after. */
  rotated_at: Date | null;
  /** The successor sealed under this token (grace window only, `sealSuccessor`); null otherwise. */
  successor_ciphertext: string | null;
  /** The family may be refreshed at `now` ({@link familyLiveSql}: not revoked, a second or more left). */
  family_live: boolean;
  /** The family is not revoked and has not ended, but is in its last second (under {@link MIN_SESSION_LIFETIME_SECONDS} left). */
  family_in_last_second: boolean;
  session_expires_at: Date;
  /** How the session's sign-in was authenticated (RFC 8176), kept across refreshes. */
  amr: string[];
}

/** The direct successor of a token: the token inserted when it was rotated. */
export interface SuccessorToken {
  id: string;
  /** SHA-256 of the token, base64url. */
  token_hash: string;
  /** null while it is the family's live token. */
  rotated_at: Date | null;
}

/**
 * The statement of {@link lockRefreshToken} for a token that names its row (`byId`) or not.
 * Parameters: $1 the token's hash, $2 now, $3 its id (`byId` only).
 */
function lockSql(byId: boolean): string {
  return `SELECT rt.id, rt.session_id, s.user_id, rt.rotated_at, rt.successor_ciphertext,
            ${familyLiveSql('s', '$2::timestamptz')} AS family_live,
            (s.revoked_at IS NULL AND s.expires_at > $2::timestamptz AND NOT ${familyLiveSql('s', '$2::timestamptz')}) AS family_in_last_second,
            s.expires_at AS session_expires_at, s.amr
       FROM refresh_tokens rt JOIN sessions s ON s.id = rt.session_id
      WHERE ${presentedTokenSql(byId, '$1', '$3')}
      FOR UPDATE`;
}
const LOCK_BY_ID_SQL = lockSql(true);
const LOCK_BY_HASH_SQL = lockSql(false);

/**
 * Finds the presented token ({@link presentedTokenSql}) and locks its row and its session's row
 * (`FOR UPDATE`) until the transaction ends, so parallel refreshes, logouts and revocations of one
 * family serialise. The family's liveness at `now` is decided here, by the rule of the rotation
 * ({@link familyLiveSql}).
 * @returns undefined when no token is the presented one.
 */
export async function lockRefreshToken(q: Queryable, presented: PresentedRefreshToken, now: Date): Promise<LockedRefreshToken | undefined> {
  const { rows } = await q.query<LockedRefreshToken>(
    presented.id === null ? LOCK_BY_HASH_SQL : LOCK_BY_ID_SQL,
    presented.id === null ? [presented.tokenHash, now] : [presented.tokenHash, now, presented.id],
  );
  return rows[0];
}

/**
 * A data-modifying CTE for a rotation statement whose CTE `rotated` returns the rotated token's
 * `parent_id` and whose `$3` is the new sealed successor (null under the strict rule): erases the
 * sealed successor held by the parent. That seal opens to the token being rotated now, which is
 * no longer live, so it can never serve the grace window again (refresh-grace.ts: a grandparent
 * is reuse); erased, a database copy plus the parent token yields nothing. Skipped under the
 * strict rule (`$3` null), where rotations seal nothing; seals left from a time the window was on
 * are erased by the retention worker once their window has passed.
 *
 * The parent's row is skipped when another transaction holds it (`SKIP LOCKED`): a grace replay
 * of the parent locks that row before the session's, the opposite order of a rotation, so
 * waiting for it could deadlock. A seal skipped so opens to a rotated token only, and the
 * retention worker erases it once its window has passed.
 */
const ERASE_PARENT_SEAL_SQL = `UPDATE refresh_tokens p SET successor_ciphertext = NULL, sealed_at = NULL
        WHERE p.id = ANY(ARRAY(
          SELECT q.id FROM refresh_tokens q JOIN rotated ON q.id = rotated.parent_id
           WHERE $3::text IS NOT NULL AND q.successor_ciphertext IS NOT NULL
             FOR UPDATE OF q SKIP LOCKED))
       RETURNING p.id`;

/**
 * The statement of {@link rotateLiveRefreshToken}; with `unseal` (grace window on), it also
 * records when the seal was made (`sealed_at`, which the retention worker erases it by) and
 * erases the parent's seal ({@link ERASE_PARENT_SEAL_SQL}). Under the strict rule nothing is sealed,
 * so that part is left out of the statement rather than skipped at run time. The deadline check
 * reads the count of every data-modifying or locking CTE (see rotateLiveRefreshToken).
 *
 * Under the strict rule the UPDATE writes only `rotated_at` (and a NULL over the NULL
 * `successor_ciphertext`), which no index reads (migration 019): the new row version stays on
 * its page and no index of `refresh_tokens` gets an entry for it (a HOT update).
 *
 * The presented token is found by {@link presentedTokenSql}: by its id when it names its row
 * (`byId`), else by its hash. The successor is of the current format (2).
 *
 * Parameters: $1 presented token's hash, $2 now, $3 sealed successor or null, $4 successor's
 * id, $5 successor's hash, $6 `last_used_at` resolution in seconds, $7 deadline or null, $8 the
 * presented token's id (`byId` only).
 */
function rotationSql(unseal: boolean, byId: boolean): string {
  return `WITH rotated AS (
       UPDATE refresh_tokens rt SET rotated_at = $2, successor_ciphertext = $3${unseal ? ', sealed_at = $2' : ''}
         FROM sessions s
        WHERE ${presentedTokenSql(byId, '$1', '$8')} AND rt.rotated_at IS NULL
          AND s.id = rt.session_id AND ${familyLiveSql('s', '$2::timestamptz')}
       RETURNING rt.id, rt.session_id, rt.parent_id, s.user_id, s.expires_at, s.amr,
                 (s.last_used_at IS NULL OR s.last_used_at <= $2::timestamptz - make_interval(secs => $6)) AS last_use_stale
     ), ${unseal ? `unsealed AS (
       ${ERASE_PARENT_SEAL_SQL}
     ), ` : ''}successor AS (
       INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at, format)
       SELECT $4, session_id, $5, id, $2, 2 FROM rotated
       RETURNING id
     ), touched AS (
       UPDATE sessions t SET last_used_at = $2 FROM rotated
        WHERE t.id = rotated.session_id AND rotated.last_use_stale
       RETURNING t.id
     ), kept AS (
       SELECT k.id FROM sessions k WHERE k.id IN (SELECT session_id FROM rotated) FOR KEY SHARE
     )
     SELECT session_id, user_id, expires_at AS session_expires_at, amr,
            statement_deadline_check($7::timestamptz,
              (SELECT count(*) FROM successor) + (SELECT count(*) FROM touched) + (SELECT count(*) FROM kept)${unseal ? ' + (SELECT count(*) FROM unsealed)' : ''}) AS in_time,
            clock_timestamp() AS database_now
       FROM rotated`;
}
/** The four statements of {@link rotationSql}, by `unseal` (grace window on) and `byId`. */
const ROTATE_SQL = {
  strict: { byId: rotationSql(false, true), byHash: rotationSql(false, false) },
  unseal: { byId: rotationSql(true, true), byHash: rotationSql(true, false) },
} as const;

/** The family of a token rotated by {@link rotateLiveRefreshToken}. */
export interface RotatedRefreshToken {
  session_id: string;
  user_id: string;
  session_expires_at: Date;
  /** The session's authentication methods (RFC 8176). */
  amr: string[];
  /** The database's `clock_timestamp()` just before the statement committed (for `StatementDeadlines.observe`). */
  database_now: Date;
}

/**
 * The one rotation write of a refresh (docs/api.md#refresh-token-rotation, docs/performance.md).
 * When the `presented` token ({@link presentedTokenSql}) is live (never rotated) and its family
 * is live at `now` ({@link familyLiveSql}), marks the token rotated, inserts `successor` as its
 * child, erases the sealed successor its parent holds ({@link ERASE_PARENT_SEAL_SQL}; only when
 * `successor.ciphertext` is set), and records the use of the session (`last_used_at`, when it
 * is at least `lastUsedResolutionSeconds` old: at most one write a minute per session), all in
 * one statement.
 *
 * In its common case it runs on its own (autocommit: one round trip, one commit). The guarded
 * UPDATE locks the token's row: parallel rotations of one token serialise on it, and one that
 * waited re-checks "not yet rotated" on the row as committed (READ COMMITTED re-evaluation), so
 * exactly one succeeds and the others get undefined. The session's row is read, then locked:
 * recording its use takes a row lock (in the `touched` CTE), and the `kept` CTE takes the
 * key-share lock that the successor's foreign key needs (PostgreSQL's referential-integrity
 * trigger takes it again at the end of the statement, already held then), so that a wait for a
 * transaction holding the session (reuse, grace window) ends before the deadline check.
 * A revocation committing meanwhile leaves a family whose every later use checks the session
 * (docs/api.md#bearer-authentication). Locks come in the order of
 * {@link lockRefreshToken}'s: the token, then its session. The locking transaction runs the same
 * statement when it finds the token live after all.
 *
 * Last, once every lock is taken and every write done, it checks `deadline` against the
 * database's clock (`statement_deadline_check`, migration 010): a statement that reached the
 * server after its request stopped waiting (docs/reliability.md) fails with SQLSTATE 57014
 * instead of committing. The check's argument reads every data-modifying or locking CTE, so
 * their lock waits are over before it runs; it sits in the select list, which is evaluated per returned
 * row, after the rotation (a condition naming no column would run first, as a one-time filter).
 *
 * @param successor the replacing token: its id, SHA-256 hash, and the successor sealed under the
 *   presented token (grace window) or null (strict rule).
 * @param lastUsedResolutionSeconds how old `last_used_at` must be before it is written again, in seconds.
 * @param deadline the database-clock time after which the statement must not commit, or null
 *   to check nothing (`StatementDeadlines.next`; null inside a transaction).
 * @returns the family, or undefined when nothing was rotated (no such token, already rotated,
 *   or its family ended): the caller decides between reuse, grace and invalid with
 *   {@link lockRefreshToken} in a transaction of its own.
 * @throws the driver's error with SQLSTATE 57014 when the deadline had passed (nothing committed).
 */
export async function rotateLiveRefreshToken(
  q: Queryable,
  t: {
    presented: PresentedRefreshToken;
    now: Date;
    successor: { id: string; tokenHash: string; ciphertext: string | null };
    lastUsedResolutionSeconds: number;
    deadline: Date | null;
  },
): Promise<RotatedRefreshToken | undefined> {
  const { presented, successor } = t;
  const statements = successor.ciphertext === null ? ROTATE_SQL.strict : ROTATE_SQL.unseal;
  const values: unknown[] = [presented.tokenHash, t.now, successor.ciphertext, successor.id, successor.tokenHash, t.lastUsedResolutionSeconds, t.deadline];
  if (presented.id !== null) values.push(presented.id);
  const { rows } = await q.query<RotatedRefreshToken & { in_time: boolean }>(presented.id === null ? statements.byHash : statements.byId, values);
  const row = rows[0];
  if (row === undefined) return undefined;
  const { in_time: _checked, ...rotated } = row;
  return rotated;
}

/**
 * The direct successor (child) of token `parentId`; at most one exists (unique index
 * `refresh_tokens_one_successor`). Not locked: callers hold the family's session row lock
 * from {@link lockRefreshToken}, which every rotation of the family also takes.
 * @returns undefined when the token was never rotated.
 */
export async function findSuccessor(q: Queryable, parentId: string): Promise<SuccessorToken | undefined> {
  const { rows } = await q.query<SuccessorToken>(
    'SELECT id, token_hash, rotated_at FROM refresh_tokens WHERE parent_id = $1',
    [parentId],
  );
  return rows[0];
}
