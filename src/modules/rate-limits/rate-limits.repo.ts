import type { Queryable } from '../../db/db.js';

/** The state of one fixed window after a hit. */
export interface WindowHit {
  /** Hits in the current window, this one included. */
  hits: number;
  windowStart: Date;
}

/**
 * Counts one hit against `key` in a fixed window of `windowSeconds`, atomically (one upsert),
 * so parallel requests and several service instances share one count.
 */
export async function hitWindow(q: Queryable, key: string, windowSeconds: number, now: Date): Promise<WindowHit> {
  const { rows } = await q.query<{ hits: number; window_start: Date }>(
    `INSERT INTO rate_limits AS r (key, window_start, hits) VALUES ($1, $2, 1)
     ON CONFLICT (key) DO UPDATE SET
       hits = CASE WHEN r.window_start <= $2::timestamptz - make_interval(secs => $3) THEN 1 ELSE r.hits + 1 END,
       window_start = CASE WHEN r.window_start <= $2::timestamptz - make_interval(secs => $3) THEN $2 ELSE r.window_start END
     RETURNING hits, window_start`,
    [key, now, windowSeconds],
  );
  const row = rows[0]!;
  return { hits: row.hits, windowStart: row.window_start };
}

/** Takes back one hit from the current window of `key` (a request that turned out legitimate). */
export async function forgiveHit(q: Queryable, key: string): Promise<void> {
  await q.query('UPDATE rate_limits SET hits = hits - 1 WHERE key = $1 AND hits > 0', [key]);
}

/**
 * Deletes windows that started before `before` (none of them can still count).
 * @returns how many rows were deleted.
 */
export async function purgeWindows(q: Queryable, before: Date): Promise<number> {
  const { rowCount } = await q.query('DELETE FROM rate_limits WHERE window_start < $1', [before]);
  return rowCount;
}
