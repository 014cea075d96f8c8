import type { Clock } from '../../src/clock.js';

/** A clock that only moves when told to. */
export class TestClock implements Clock {
  private t: number;
  constructor(start: Date = new Date()) {
    this.t = start.getTime();
  }
  now(): Date {
    return new Date(this.t);
  }
  /** Moves time forward by `seconds`. */
  advance(seconds: number): void {
    this.t += seconds * 1000;
  }
}

/**
 * A clock that follows the real time, plus whatever `advance` added: for tests in which a
 * browser's timers and the service must agree on time (tokens that expire while a page waits).
 */
export class WallClock extends TestClock {
  private offsetMs = 0;
  override now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
  override advance(seconds: number): void {
    this.offsetMs += seconds * 1000;
  }
}
