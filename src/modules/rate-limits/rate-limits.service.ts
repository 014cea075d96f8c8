import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { hmacSha256 } from '../../crypto/secrets.js';
import { forgiveHit, hitWindow, purgeWindows } from './rate-limits.repo.js';

/** One limit: at most `limit` counted requests per subject in a fixed window of `windowSeconds`; a limit of 0 disables it. */
export interface RateLimitRule {
  /** Stable name, part of the stored key (`sign_in_identifier`, `sign_up_ip`, ...). */
  readonly name: string;
  readonly limit: number;
  readonly windowSeconds: number;
}

/** The outcome of counting one request. */
export type RateLimitVerdict = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterSeconds: number };

/**
 * Fixed-window counters kept in PostgreSQL (`rate_limits`), so limits hold across instances and
 * restarts (ASVS 5.0 V6.3.1 / V2.4.1). Subjects (addresses, identifiers, IPs) are stored only
 * as HMACs under a server key.
 */
export interface RateLimiter {
  /**
   * Counts one request of `subject` against `rule`, atomically (parallel requests never pass
   * more than `limit`).
   * @returns allowed, or refused with the seconds until the window ends (for `Retry-After`).
   */
  hit(rule: RateLimitRule, subject: string): Promise<RateLimitVerdict>;
  /** Takes back one counted request (for example a sign-in that succeeded). */
  forgive(rule: RateLimitRule, subject: string): Promise<void>;
  /** Starts deleting ended windows every {@link PURGE_INTERVAL_MS}; stopped by {@link stop}. */
  start(): void;
  stop(): void;
}

/** How often ended windows are deleted. */
export const PURGE_INTERVAL_MS = 10 * 60 * 1000;
/** Windows older than this are deleted: longer than any rule's window. */
export const PURGE_AFTER_SECONDS = 24 * 60 * 60;

/** Builds the {@link RateLimiter}. */
export function createRateLimiter(deps: { db: Db; clock: Clock; hmacKey: Buffer; log: FastifyBaseLogger }): RateLimiter {
  const { db, clock, hmacKey, log } = deps;
  const keyOf = (rule: RateLimitRule, subject: string): string => `${rule.name}:${hmacSha256(hmacKey, subject)}`;
  const retryAfter = (windowStart: Date, rule: RateLimitRule, now: Date): number =>
    Math.max(1, Math.ceil((windowStart.getTime() + rule.windowSeconds * 1000 - now.getTime()) / 1000));
  let timer: NodeJS.Timeout | undefined;
  return {
    async hit(rule, subject) {
      if (rule.limit <= 0) return { allowed: true };
      const now = clock.now();
      const w = await hitWindow(db, keyOf(rule, subject), rule.windowSeconds, now);
      return w.hits <= rule.limit ? { allowed: true } : { allowed: false, retryAfterSeconds: retryAfter(w.windowStart, rule, now) };
    },
    async forgive(rule, subject) {
      if (rule.limit <= 0) return;
      await forgiveHit(db, keyOf(rule, subject));
    },
    start() {
      if (timer !== undefined) return;
      timer = setInterval(() => {
        purgeWindows(db, new Date(clock.now().getTime() - PURGE_AFTER_SECONDS * 1000)).catch((err: unknown) =>
          log.warn({ err }, 'rate-limit purge failed'),
        );
      }, PURGE_INTERVAL_MS);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}
