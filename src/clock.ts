/** The source of "now". Injected so tests control time instead of sleeping (STYLE habit 8). */
export interface Clock {
  /** The current instant. */
  now(): Date;
}

/** The real clock, used in production. */
export const systemClock: Clock = { now: () => new Date() };
