/**
 * Runs an async job one call at a time, for the background workers (outbox, webhook delivery,
 * retention): a call made while another is in flight waits for it, then runs afresh, so a
 * test's `runOnce()` and the worker's own timer never run a round concurrently, and each round
 * reads the clock at its own start.
 */
export interface OneAtATime<T> {
  /** Runs the job once, after the call in flight (if any) has ended; resolves or rejects as the job does. */
  run(): Promise<T>;
  /** The call in flight, if any (its failure is the caller's of `run`, so this never rejects). */
  inFlight(): Promise<unknown> | undefined;
}

/** Wraps `job` in {@link OneAtATime}. */
export function oneAtATime<T>(job: () => Promise<T>): OneAtATime<T> {
  let running: Promise<T> | undefined;
  return {
    async run() {
      while (running !== undefined) await running.catch(() => undefined);
      running = job();
      try {
        return await running;
      } finally {
        running = undefined;
      }
    },
    inFlight: () => running?.catch(() => undefined),
  };
}
