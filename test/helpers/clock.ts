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
