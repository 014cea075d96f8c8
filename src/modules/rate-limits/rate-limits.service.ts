import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { hmacSha256 } from '../../crypto/secrets.js';
import { AppError, type ERROR_CATALOG, type ErrorCode } from '../../errors.js';
import { BATCH_PAUSE_MS, MAX_BATCHES_PER_RUN, purgeInBatches } from '../../db/batches.js';
import { clientNetwork } from './client-network.js';
import { forgiveHits, hitWindow, hitWindowsAfter, PURGE_BATCH_SIZE, purgeWindows, type AccountWindowKey, type HitPlan, type KeyedWindowHit } from './rate-limits.repo.js';

/**
 * What a rule's subject is, which decides how it is stored in the key:
 * - `client`: a client IP address, counted per network ({@link clientNetwork}: an IPv4 address,
 *   an IPv6 /64), stored as an HMAC;
 * - `secret`: a value not to be stored in the clear (an identifier, an address), stored as an HMAC;
 * - `account`: a user id, stored as it is (it is no personal data beyond the users table), so a
 *   statement that finds the user can also find the account's window ({@link RateLimiter.accountWindow}).
 */
export type RateLimitSubject = 'client' | 'secret' | 'account';

/** One limit: at most `limit` counted requests per subject in a fixed window of `windowSeconds`; a limit of 0 disables it. */
export interface RateLimitRule {
  /** Stable name, part of the stored key (`sign_in_ip`, `sign_up_ip`, ...). */
  readonly name: string;
  readonly subject: RateLimitSubject;
  readonly limit: number;
  readonly windowSeconds: number;
}

/** One request of `subject` counted against `rule`. */
export interface RateLimitHit {
  readonly rule: RateLimitRule;
  readonly subject: string;
}

/** The counts of one request under several rules: `first`, then each subject under `rule` (see {@link RateLimiter.hitAll}). */
export interface RateLimitBatch {
  readonly first?: RateLimitHit | undefined;
  readonly rule: RateLimitRule;
  /** Distinct subjects. */
  readonly subjects: readonly string[];
}

/** An account's failures in the current window under an `account` rule, as `withCurrentWindowSql` of rate-limits.repo.ts joins them to each row. */
export interface AccountWindow {
  window_hits: number | null;
  window_start: Date | null;
}

/** The current window of the fallback key of `withCurrentWindowSql` (rate-limits.repo.ts), on every row. */
export interface FallbackWindow {
  fallback_hits: number | null;
  fallback_window_start: Date | null;
}

/** The keys of one request's counts, ready for a statement ({@link RateLimiter.plan}). */
export interface BatchPlan extends HitPlan {
  readonly batch: RateLimitBatch;
  readonly firstRule?: RateLimitRule | undefined;
}

/** {@link RateLimiter.judge}'s outcome. */
export interface BatchVerdict {
  readonly verdict: RateLimitVerdict;
  readonly batchHits: readonly number[];
  readonly keys: readonly string[];
}

/** The outcome of counting one request. */
export type RateLimitVerdict = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterSeconds: number };

/** The catalog codes answered with 429 Too Many Requests (docs/api.md#rate-limits): the ones {@link tooManyAttempts} accepts. */
export type TooManyAttemptsCode = { [C in ErrorCode]: (typeof ERROR_CATALOG)[C]['status'] extends 429 ? C : never }[ErrorCode];

/**
 * The refusal of a request over a rate limit: the 429 of `code` with `Retry-After` (RFC 9110
 * §10.2.3) in whole seconds, at least 1 (a fraction is rounded up, so a client that waits as
 * told is not refused again for the same window). The one way every limiter caller builds it,
 * directly when it computed the verdict itself ({@link RateLimiter.hitAll},
 * {@link RateLimiter.accountVerdict}) and through {@link RateLimiter.enforce} otherwise.
 */
export function tooManyAttempts(code: TooManyAttemptsCode, retryAfterSeconds: number): AppError {
  const seconds = Number.isFinite(retryAfterSeconds) ? Math.max(1, Math.ceil(retryAfterSeconds)) : 1;
  return new AppError(code, { headers: { 'retry-after': String(seconds) } });
}

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
  /**
   * {@link hit}, refusing: counts one request of `subject` against `rule` and, when it is over
   * the limit, calls `onRefused` (the caller's security event, log line or metric) and throws
   * {@link tooManyAttempts} of `code`. One statement, as {@link hit}.
   * @throws AppError `code` (429, Retry-After) when refused.
   */
  enforce(rule: RateLimitRule, subject: string, code: TooManyAttemptsCode, onRefused?: () => void): Promise<void>;
  /**
   * Counts one request of `batch.first` and then, unless that one is refused, one of each of
   * `batch.subjects` against `batch.rule`, in one statement (one round trip, one commit):
   * {@link plan}, `hitWindowsAfter` of rate-limits.repo.ts, then {@link judge}. A request that
   * must also read in that statement (sign-in) runs the plan in a statement of its own
   * repository instead, and judges its windows the same way.
   * @returns as {@link judge}.
   */
  hitAll(batch: RateLimitBatch): Promise<BatchVerdict>;
  /**
   * The stored keys of `batch` (disabled rules left out), in the order a statement locks them
   * (`first`, then the others sorted; another order could deadlock against a parallel count),
   * with the windows' lengths and the time, ready for `hitWindowsAfter` of rate-limits.repo.ts.
   * Sign-in counts the client IP first, so that a source already over its limit does not also
   * count against (and so lock) the identifiers it names.
   */
  plan(batch: RateLimitBatch): BatchPlan;
  /**
   * The verdict on the windows a statement counted for `plan`: refused when any count is over
   * its limit, with the longest wait.
   * @returns the verdict; `batchHits`, the count of each of `batch.subjects` in its current
   *   window after this one, in their order (empty when `first` was refused or the rule is
   *   disabled); `keys`, the plan's keys in lock order, for taking the counts back later
   *   ({@link forgiveKeys}, or `forgiveHitsSql` of rate-limits.repo.ts inside another statement).
   */
  judge(plan: BatchPlan, windows: readonly KeyedWindowHit[]): BatchVerdict;
  /**
   * Where the current window of an account under `rule` (an `account` rule) is, for
   * `withCurrentWindowSql` of rate-limits.repo.ts: a statement that finds users can read their
   * failures in the same round trip (`window_hits`, `window_start`, {@link AccountWindow}).
   */
  accountWindow(rule: RateLimitRule): AccountWindowKey;
  /** The stored key of `hit` (an HMAC of its subject, or the user id of an `account` rule). */
  keyOf(hit: RateLimitHit): string;
  /**
   * The verdict for a request under an `account` rule whose window a statement read
   * ({@link accountWindow}): refused when the failures already counted reach `rule.limit` (this request would be
   * one more).
   */
  accountVerdict(rule: RateLimitRule, window: AccountWindow): RateLimitVerdict;
  /** Takes back one counted request (for example a sign-in that succeeded). */
  forgive(rule: RateLimitRule, subject: string): Promise<void>;
  /** Takes back one count of each of `keys` (as {@link hitAll} returned them), in one statement. */
  forgiveKeys(keys: readonly string[]): Promise<void>;
  /**
   * Starts deleting ended windows every {@link PURGE_INTERVAL_MS}, in bounded statements
   * (`purgeWindows`, at most `MAX_BATCHES_PER_RUN` per run); stopped by {@link stop}.
   */
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
  const keyOf = (rule: RateLimitRule, subject: string): string => {
    if (rule.subject === 'account') return `${rule.name}:${subject}`;
    return `${rule.name}:${hmacSha256(hmacKey, rule.subject === 'client' ? clientNetwork(subject) : subject)}`;
  };
  const retryAfter = (windowStart: Date, rule: RateLimitRule, now: Date): number =>
    Math.max(1, Math.ceil((windowStart.getTime() + rule.windowSeconds * 1000 - now.getTime()) / 1000));
  let timer: NodeJS.Timeout | undefined;
  const plan = (batch: RateLimitBatch): BatchPlan => {
    const { first } = batch;
    const keys = batch.rule.limit <= 0 ? [] : batch.subjects.map((subject) => keyOf(batch.rule, subject)).sort();
    const counted = first === undefined || first.rule.limit <= 0 ? undefined : first;
    return {
      batch,
      firstRule: counted?.rule,
      first: counted === undefined ? undefined : { key: keyOf(counted.rule, counted.subject), windowSeconds: counted.rule.windowSeconds, limit: counted.rule.limit },
      keys,
      windowSeconds: batch.rule.windowSeconds,
      now: clock.now(),
    };
  };
  const judge = (batchPlan: BatchPlan, windows: readonly KeyedWindowHit[]): BatchVerdict => {
    const { batch, first, firstRule, keys, now } = batchPlan;
    const refused = windows.flatMap((w) => {
      const rule = w.key === first?.key && firstRule !== undefined ? firstRule : batch.rule;
      return w.hits <= rule.limit ? [] : [retryAfter(w.windowStart, rule, now)];
    });
    const verdict: RateLimitVerdict = refused.length === 0 ? { allowed: true } : { allowed: false, retryAfterSeconds: Math.max(...refused) };
    const hitsOf = new Map(windows.map((w) => [w.key, w.hits]));
    const counted = keys.length > 0 && hitsOf.has(keys[0]!);
    const batchHits = counted ? batch.subjects.map((subject) => hitsOf.get(keyOf(batch.rule, subject)) ?? 0) : [];
    return { verdict, batchHits, keys: first === undefined ? keys : [first.key, ...keys] };
  };
  const hit = async (rule: RateLimitRule, subject: string): Promise<RateLimitVerdict> => {
    if (rule.limit <= 0) return { allowed: true };
    const now = clock.now();
    const w = await hitWindow(db, keyOf(rule, subject), rule.windowSeconds, now);
    return w.hits <= rule.limit ? { allowed: true } : { allowed: false, retryAfterSeconds: retryAfter(w.windowStart, rule, now) };
  };
  return {
    plan,
    judge,
    hit,
    async enforce(rule, subject, code, onRefused) {
      const verdict = await hit(rule, subject);
      if (verdict.allowed) return;
      onRefused?.();
      throw tooManyAttempts(code, verdict.retryAfterSeconds);
    },
    async hitAll(batch) {
      const counted = plan(batch);
      // With every rule disabled the statement counts nothing.
      const { windows } = await hitWindowsAfter(db, counted);
      return judge(counted, windows);
    },
    accountWindow(rule) {
      return { keyPrefix: `${rule.name}:`, windowSeconds: rule.windowSeconds, now: clock.now() };
    },
    keyOf(hit) {
      return keyOf(hit.rule, hit.subject);
    },
    accountVerdict(rule, window) {
      if (rule.limit <= 0 || window.window_hits === null || window.window_start === null || window.window_hits < rule.limit) return { allowed: true };
      return { allowed: false, retryAfterSeconds: retryAfter(window.window_start, rule, clock.now()) };
    },
    async forgive(rule, subject) {
      if (rule.limit <= 0) return;
      await forgiveHits(db, [keyOf(rule, subject)]);
    },
    async forgiveKeys(keys) {
      await forgiveHits(db, keys);
    },
    start() {
      if (timer !== undefined) return;
      timer = setInterval(() => {
        const before = new Date(clock.now().getTime() - PURGE_AFTER_SECONDS * 1000);
        const stopping = (): boolean => timer === undefined; // stop() ends a run between two statements
        purgeInBatches((limit) => purgeWindows(db, before, limit), { batchSize: PURGE_BATCH_SIZE, maxBatches: MAX_BATCHES_PER_RUN, pauseMs: BATCH_PAUSE_MS, stopping }).catch(
          (err: unknown) => log.warn({ err }, 'rate-limit purge failed'),
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
