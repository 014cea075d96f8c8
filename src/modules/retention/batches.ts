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
