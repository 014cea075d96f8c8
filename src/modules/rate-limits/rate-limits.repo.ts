import type { Queryable } from '../../db/db.js';
import { batchedDeleteSql } from '../../db/batches.js';
import { SqlParams } from '../../db/sql-params.js';

/** The state of one fixed window after a hit. */
export interface WindowHit {
  /** Hits in the current window, this one included. */
  hits: number;
  windowStart: Date;
}

/**
 * The fixed-window rule, as the tail of an `INSERT INTO rate_limits AS r` of one hit per row: a
 * window that started `$window` seconds or more before `$now` (placeholders of the statement)
 * restarts there with this hit, any other gets the hit added. Returns the row's key, hits and
 * window start.
 */
function countHitSql($now: string, $window: string): string {
  const ended = `r.window_start <= ${$now}::timestamptz - make_interval(secs => ${$window})`;
  return `ON CONFLICT (key) DO UPDATE SET
       hits = CASE WHEN ${ended} THEN 1 ELSE r.hits + 1 END,
       window_start = CASE WHEN ${ended} THEN ${$now} ELSE r.window_start END
     RETURNING r.key, r.hits, r.window_start`;
}

/**
 * Counts one hit against `key` in a fixed window of `windowSeconds`, atomically (one upsert),
 * so parallel requests and several service instances share one count.
 */
export async function hitWindow(q: Queryable, key: string, windowSeconds: number, now: Date): Promise<WindowHit> {
  const { rows } = await q.query<{ hits: number; window_start: Date }>(
    `INSERT INTO rate_limits AS r (key, window_start, hits) VALUES ($1, $2, 1)
     ${countHitSql('$2', '$3')}`,
    [key, now, windowSeconds],
  );
  const row = rows[0]!;
  return { hits: row.hits, windowStart: row.window_start };
}

/** One stored window after a hit, by its key. */
export interface KeyedWindowHit extends WindowHit {
  key: string;
}

/**
 * The counts of one request, ready for a statement: the stored keys already derived and sorted
 * (RateLimiter.plan). `first` (when given) is counted before `keys`, which share one window of
 * `windowSeconds`.
 */
export interface HitPlan {
  readonly first?: { readonly key: string; readonly windowSeconds: number; readonly limit: number } | undefined;
  /** Distinct keys, none equal to `first.key`, in lock order. */
  readonly keys: readonly string[];
  readonly windowSeconds: number;
  readonly now: Date;
}

/**
 * Counts one hit against `plan.first` (when given) and, unless that one is then over its limit,
 * one hit against each of `plan.keys`, all in one statement (one round trip, one commit). Rows
 * are locked in the order given, `first` before `keys`; {@link forgiveHitsSql} locks in the same
 * order, so the two cannot deadlock as long as callers pass the keys sorted the same way (the
 * rate limiter does). Every window follows the rule of {@link hitWindow}.
 *
 * `read`, when given, writes a SELECT that the same statement runs, adding its own parameters to
 * the statement's {@link SqlParams}; a request that must be counted before it reads (sign-in)
 * makes one round trip for both. It sees the database as it was before this statement's hits.
 * @returns `windows`: every window counted (`first` first; the keys are missing when `first` was
 *   over its limit); `rows`: the rows of `read` (empty without one).
 */
export async function hitWindowsAfter<R extends object = never>(
  q: Queryable,
  plan: HitPlan,
  read?: (p: SqlParams) => string,
): Promise<{ windows: KeyedWindowHit[]; rows: R[] }> {
  const p = new SqlParams();
  const $now = p.add(plan.now);
  const $firstKey = p.add(plan.first?.key ?? null);
  const $firstWindow = p.add(plan.first?.windowSeconds ?? 0);
  const $firstLimit = p.add(plan.first?.limit ?? 0);
  const $keys = p.add([...plan.keys]);
  const $window = p.add(plan.windowSeconds);
  const readSql = read?.(p);
  // The windows travel as one JSON array beside the rows of `read` (one row of NULLs when it has none).
  const { rows } = await q.query<{ windows: { key: string; hits: number; window_start: string }[]; read_row: boolean | null } & R>(
    `WITH first AS (
       INSERT INTO rate_limits AS r (key, window_start, hits) SELECT ${$firstKey}::text, ${$now}, 1 WHERE ${$firstKey}::text IS NOT NULL
       ${countHitSql($now, $firstWindow)}
     ), rest AS (
       INSERT INTO rate_limits AS r (key, window_start, hits)
       SELECT k.key, ${$now}, 1 FROM unnest(${$keys}::text[]) WITH ORDINALITY AS k(key, n)
        WHERE NOT EXISTS (SELECT 1 FROM first WHERE first.hits > ${$firstLimit})
        ORDER BY k.n
       ${countHitSql($now, $window)}
     ), counted AS (
       SELECT coalesce(json_agg(json_build_object('key', h.key, 'hits', h.hits, 'window_start', h.window_start) ORDER BY h.leading DESC), '[]'::json) AS windows
         FROM (SELECT key, hits, window_start, true AS leading FROM first UNION ALL SELECT key, hits, window_start, false FROM rest) AS h
     )
     ${readSql === undefined ? 'SELECT counted.windows FROM counted' : `SELECT counted.windows, x.* FROM counted LEFT JOIN (SELECT true AS read_row, e.* FROM (${readSql}) AS e) AS x ON true`}`,
    p.values,
  );
  const windows = (rows[0]?.windows ?? []).map((w) => ({ key: w.key, hits: w.hits, windowStart: new Date(w.window_start) }));
  return { windows, rows: rows.filter((r) => r.read_row === true).map(({ windows: _w, read_row: _r, ...row }) => row as unknown as R) };
}

/** Where an account's window under an `account` rule is found (RateLimiter.accountWindow): its key is `keyPrefix` and the user id. */
export interface AccountWindowKey {
  readonly keyPrefix: string;
  readonly windowSeconds: number;
  readonly now: Date;
}

/**
 * `rowsSql` (a SELECT whose rows have an `id` column) with each row's current window joined:
 * the row of key `account.keyPrefix || id` whose window started less than
 * `account.windowSeconds` seconds before `account.now`, as `window_hits` and `window_start`
 * (both null when there is none). With `fallbackKey`, also the current window (same length) of
 * that key, as `fallback_hits` and `fallback_window_start` on every row, and always at least
 * one row: when `rowsSql` has none, one whose columns of `rowsSql` are all null. One
 * primary-key lookup per row, and one for the fallback; reads only. Its parameters are added to `p`.
 */
export function withCurrentWindowSql(p: SqlParams, rowsSql: string, account: AccountWindowKey, fallbackKey?: string): string {
  const $keyPrefix = p.add(account.keyPrefix);
  const $now = p.add(account.now);
  const $window = p.add(account.windowSeconds);
  const current = (alias: string): string => `${alias}.window_start > ${$now}::timestamptz - make_interval(secs => ${$window})`;
  if (fallbackKey === undefined) {
    return `SELECT x.*, w.hits AS window_hits, w.window_start AS window_start
       FROM (${rowsSql}) AS x
       LEFT JOIN rate_limits AS w ON w.key = ${$keyPrefix}::text || x.id::text AND ${current('w')}`;
  }
  const $fallbackKey = p.add(fallbackKey);
  return `SELECT x.*, w.hits AS window_hits, w.window_start AS window_start, f.hits AS fallback_hits, f.window_start AS fallback_window_start
       FROM (SELECT 1) AS one
       LEFT JOIN (${rowsSql}) AS x ON true
       LEFT JOIN rate_limits AS w ON w.key = ${$keyPrefix}::text || x.id::text AND ${current('w')}
       LEFT JOIN rate_limits AS f ON f.key = ${$fallbackKey}::text AND ${current('f')}`;
}

/**
 * The statement that takes back one hit from the current window of each key in the text array
 * parameter `$keys` (a placeholder of the caller's {@link SqlParams}), locking the rows in the
 * array's order (see {@link hitWindowsAfter}). Also usable as a data-modifying CTE of another
 * statement, so that a request that turned out legitimate takes its hits back in the same
 * commit as its other writes; `condition` (SQL, optional) must then hold for anything to be
 * taken back.
 */
export function forgiveHitsSql($keys: string, condition = 'true'): string {
  return `UPDATE rate_limits AS r SET hits = r.hits - 1
       FROM (SELECT l.key FROM unnest(${$keys}::text[]) WITH ORDINALITY AS k(key, n) JOIN rate_limits AS l ON l.key = k.key
              WHERE l.hits > 0 AND ${condition} ORDER BY k.n FOR UPDATE OF l) AS locked
      WHERE r.key = locked.key`;
}

/** Takes back one hit from the current window of each of `keys` (a request that turned out legitimate), in one statement. */
export async function forgiveHits(q: Queryable, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await q.query(forgiveHitsSql('$1'), [[...keys]]);
}

/**
 * Deletes the windows of `keys` (whatever their start), for an account that is deleted.
 * @returns how many rows were deleted.
 */
export async function deleteWindows(q: Queryable, keys: readonly string[]): Promise<number> {
  const { rowCount } = await q.query('DELETE FROM rate_limits WHERE key = ANY($1::text[])', [[...keys]]);
  return rowCount ?? 0;
}

/**
 * Windows deleted per purge statement: a statement takes milliseconds whatever the table's size
 * (index `rate_limits_window_start_idx`, docs/performance.md, "Retention and the cost of a
 * growing database"), and holds its row locks as briefly.
 */
export const PURGE_BATCH_SIZE = 1_000;

/**
 * Deletes up to `limit` windows that started before `before` (none of them can still count),
 * oldest first under `rate_limits_window_start_idx`; the caller repeats while a statement came
 * back full (`purgeInBatches`), so no statement runs over the whole table. Rows locked by a
 * request are skipped (`SKIP LOCKED`, left for the next purge): waiting for them while holding
 * the rows already deleted could deadlock with a statement that counts several keys at once
 * ({@link hitWindowsAfter}). The rows are deleted by their physical address, as the retention
 * purges do ({@link batchedDeleteSql}: a TID scan instead of a key lookup per row).
 * @returns how many rows were deleted.
 */
export async function purgeWindows(q: Queryable, before: Date, limit: number = PURGE_BATCH_SIZE): Promise<number> {
  const { rowCount } = await q.query(
    batchedDeleteSql('rate_limits', { ended: 'window_start' }),
    [before, limit],
  );
  return rowCount;
}
