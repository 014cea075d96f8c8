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
