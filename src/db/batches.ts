/**
 * Batched purges (docs/operations.md, "Retention"): shared by the retention worker and the
 * rate-limit windows' purge, so neither module depends on the other.
 */

/**
 * Statements per purge and run: at most 100 000 rows of each kind per run, 600 000 an hour per
 * instance. A larger backlog (the first run on a database that never purged) drains over
 * several runs instead of in one long burst.
 */
export const MAX_BATCHES_PER_RUN = 100;
/** Pause between two statements of one purge, in milliseconds: requests get the database (PGlite's one connection) in between. */
export const BATCH_PAUSE_MS = 50;

/**
 * The batched delete every plain purge runs: up to `$2` rows of `table` for which `ended` (SQL
 * over the row, compared with the cutoff `$1`) says they ended before the cutoff, the oldest
 * by `ended` first, `FOR UPDATE SKIP LOCKED`, deleted by their physical address. `ended` and
 * `where` are SQL text written here, never input: literals stay literals, so the planner can
 * match them to the partial indexes of migration 003.
 */
export function batchedDeleteSql(table: string, options: { ended: string; where?: string }): string {
  const where = options.where === undefined ? '' : `${options.where} AND `;
  return `DELETE FROM ${table} WHERE ctid = ANY(ARRAY(
       SELECT ctid FROM ${table}
        WHERE ${where}${options.ended} < $1
        ORDER BY ${options.ended}
        LIMIT $2
        FOR UPDATE SKIP LOCKED))`;
}

/** How a purge is split into bounded statements (docs/operations.md, "Retention"). */
export interface BatchOptions {
  /** Most rows one statement deletes. */
  readonly batchSize: number;
  /** Most statements per call; what is left waits for the next call (a backlog drains over several runs). */
  readonly maxBatches: number;
  /** Real-time pause between two statements in milliseconds, so a long purge yields the database (and PGlite's one connection) to requests. */
  readonly pauseMs: number;
  /** Asked before each statement after the first: true ends the loop early (the worker is stopping). */
  readonly stopping?: () => boolean;
}

/** What {@link purgeInBatches} did. */
export interface BatchOutcome {
  /** Rows the statements reported (deleted or erased). */
  readonly rows: number;
  /** Statements run. */
  readonly batches: number;
  /** True when the last statement returned fewer than `batchSize` rows: nothing eligible was left (but rows a request held). */
  readonly complete: boolean;
}

/**
 * Runs `purge(batchSize)` (one bounded statement, returning how many rows it touched) again and
 * again while a statement came back full, with a pause between two statements, at most
 * `maxBatches` times: never one statement over a whole table, and never an unbounded loop.
 *
 * @throws the first error of `purge`; rows of the statements before it stay deleted (each
 *   statement commits on its own).
 */
export async function purgeInBatches(purge: (limit: number) => Promise<number>, options: BatchOptions): Promise<BatchOutcome> {
  const { batchSize, maxBatches, pauseMs, stopping } = options;
  let rows = 0;
  for (let batches = 1; ; batches++) {
    const n = await purge(batchSize);
    rows += n;
    if (n < batchSize) return { rows, batches, complete: true };
    if (batches >= maxBatches || stopping?.() === true) return { rows, batches, complete: false };
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    if (stopping?.() === true) return { rows, batches, complete: false };
  }
}
