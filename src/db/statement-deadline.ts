import { performance } from 'node:perf_hooks';
import type { Db } from './db.js';
import { STATEMENT_TIMEOUT_MS } from './pg.js';

/**
 * How long after it is computed a statement's deadline falls, in milliseconds: the statement
 * timeout (5 s), one second short of the client's query timeout (6 s, `QUERY_TIMEOUT_MS`), the
 * earliest moment the service gives up on a statement and answers 503. The second between them
 * absorbs what the clock reading cannot know: the two clocks drifting apart, or the database's
 * clock stepping back, between two readings.
 */
export const STATEMENT_DEADLINE_MS = STATEMENT_TIMEOUT_MS;

/**
 * Oldest reading of the database's clock a deadline is computed from, in milliseconds; an
 * older one is read again first. Under load every rotation brings a fresh reading; on a quiet
 * instance this bounds how far two clocks can drift apart unseen (even a clock off by 500 ppm,
 * the most NTP corrects by slewing, drifts 30 ms a minute, far inside the second of margin).
 */
export const MAX_READING_AGE_MS = 60_000;

/**
 * Deadlines on the database's clock for statements that run on their own (autocommit) and
 * must not commit once the service stopped waiting for them (docs/reliability.md, "Database
 * silent"). A statement held back by a silent network can reach PostgreSQL after its request
 * answered 503; inside BEGIN/COMMIT it would wait for a COMMIT that never comes, and a
 * statement on its own instead checks, after its locks and writes and before it commits, that
 * the database's clock has not passed its deadline (`statement_deadline_check`, migration 010).
 *
 * The deadline is "now plus {@link STATEMENT_DEADLINE_MS}" translated to the database's clock
 * through a lower bound of the offset between the two clocks: a reading `d` of
 * `clock_timestamp()` received at this process's time `r` was taken at or before `r`, so the
 * database's clock is at least `d - r` ahead of this one. A lower bound only moves the deadline
 * earlier (a slow answer makes the reading more cautious, never less). This process's time is
 * monotonic (`performance.now()`), so a step of the service's wall clock changes nothing; the
 * injectable application clock (tests move it) is not used. A reading older than
 * {@link MAX_READING_AGE_MS} is renewed before use.
 */
export interface StatementDeadlines {
  /**
   * The deadline for a statement sent from now on, on the database's clock; null on the
   * embedded database (PGlite runs in the service's process: no network can hold a statement
   * back, so there is nothing to check). Reads the database's clock first when no reading is
   * younger than {@link MAX_READING_AGE_MS} (the first call of a process, or a quiet minute).
   * @throws the driver's error when that reading fails (an outage, answered 503).
   */
  next(): Promise<Date | null>;
  /** Records a reading of the database's `clock_timestamp()`, received just now. */
  observe(databaseNow: Date): void;
}

/** This process's monotonic time, in milliseconds on the epoch scale of `Date`. */
const monotonicNow = (): number => performance.timeOrigin + performance.now();

/** Builds the {@link StatementDeadlines} of `db`. */
export function createStatementDeadlines(db: Db): StatementDeadlines {
  /** Lower bound of (database clock - monotonicNow()) in ms, and when it was taken; undefined until the first reading. */
  let latest: { offsetMs: number; at: number } | undefined;
  /** A reading under way, shared by the calls that wait for it. */
  let reading: Promise<void> | undefined;
  const observe = (databaseNow: Date): void => {
    const at = monotonicNow();
    latest = { offsetMs: databaseNow.getTime() - at, at };
  };
  const readClock = async (): Promise<void> => {
    try {
      const { rows } = await db.query<{ now: Date }>('SELECT clock_timestamp() AS now');
      observe(rows[0]!.now);
    } finally {
      reading = undefined; // a failed reading is tried again by the next call
    }
  };
  return {
    async next() {
      if (db.kind === 'pglite') return null;
      if (latest === undefined || monotonicNow() - latest.at > MAX_READING_AGE_MS) await (reading ??= readClock());
      return new Date(monotonicNow() + STATEMENT_DEADLINE_MS + latest!.offsetMs);
    },
    observe,
  };
}
