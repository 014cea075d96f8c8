import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { openSecret } from '../../crypto/sealed-secret.js';
import { createAuthMetrics, type AuthMetrics } from '../../metrics.js';
import { oneAtATime } from '../../one-at-a-time.js';
import { createWebhookSender, type Resolver, type WebhookSender, WEBHOOK_USER_AGENT } from './webhook-sender.js';
import { webhookSignatureHeader } from './webhook-signature.js';
import { claimDueDeliveries, disableGoneEndpoint, fanOutEvents, recordAttempt, releaseDeliveryLeases, type AttemptRecord, type ClaimedDelivery } from './webhooks.repo.js';

/**
 * Delays before the retries of a delivery, in seconds, each counted from the end of the failed
 * attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (docs/api.md#retries, after the Standard
 * Webhooks specification's example schedule). The attempt that fails after the last one makes the
 * delivery dead: 8 attempts over about 28 hours.
 */
export const RETRY_SCHEDULE_SECONDS: readonly number[] = Object.freeze([5, 300, 1_800, 7_200, 18_000, 36_000, 36_000]);
/** An attempt succeeds on a 2xx within this many milliseconds (docs/api.md#retries). */
export const ATTEMPT_TIMEOUT_MS = 10_000;
/**
 * The longest `Retry-After` honoured, in seconds: a day. A receiver may ask for a later retry
 * than the schedule's; not for one that parks a delivery for weeks.
 */
export const MAX_RETRY_AFTER_SECONDS = 86_400;
/** How long a claimed delivery stays leased: well beyond an attempt's 10 s and its bookkeeping. */
export const DELIVERY_LEASE_MS = 60_000;
/**
 * Attempts one worker has in flight at most. Attempts run in parallel and each slot is refilled
 * as soon as it frees, so a slow receiver (up to 10 s an attempt) holds one slot, not the others.
 */
export const MAX_IN_FLIGHT = 32;
/** Events fanned out per statement; a round runs statements while they come back full, at most {@link MAX_FAN_OUT_BATCHES} of them. */
export const FAN_OUT_BATCH = 200;
const MAX_FAN_OUT_BATCHES = 10;
/** Idle polling period: a round costs two index probes (fan-out and claim), whatever the tables hold. */
export const POLL_INTERVAL_MS = 1_000;
/** Longest time {@link DeliveryWorker.stop} waits for the attempts in flight before releasing its leases (real time). */
export const STOP_WAIT_MS = 3_000;

const MS_PER_SECOND = 1000;
/** An answer's status is a success when it is 2xx. */
const isSuccess = (status: number): boolean => status >= 200 && status <= 299;
/** 410 Gone: the receiver wants no more webhooks; the endpoint is disabled. */
const GONE = 410;

/**
 * The delay a `Retry-After` header asks for at `now`, in seconds (RFC 9110 §10.2.3: delay
 * seconds or an HTTP-date), at most {@link MAX_RETRY_AFTER_SECONDS}; undefined when absent or
 * unreadable.
 */
export function retryAfterSeconds(header: string | undefined, now: Date): number | undefined {
  if (header === undefined) return undefined;
  const text = header.trim();
  // Delay seconds, or an HTTP-date, whose three forms all begin with the day's name.
  const seconds = /^\d{1,10}$/.test(text) ? Number(text) : /^[A-Za-z]{3}/.test(text) ? (Date.parse(text) - now.getTime()) / MS_PER_SECOND : Number.NaN;
  return Number.isFinite(seconds) ? Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(0, Math.ceil(seconds))) : undefined;
}

/**
 * When the next attempt of a delivery is due after its `failed`th failed attempt (counted since it
 * was created or last retried by an operator) ended at `end`: the schedule's delay, or the
 * `Retry-After` delay when longer; null when the schedule is over (the delivery is dead).
 */
export function nextAttemptAt(failed: number, end: Date, retryAfter: number | undefined): Date | null {
  const delay = RETRY_SCHEDULE_SECONDS[failed - 1];
  if (delay === undefined) return null;
  return new Date(end.getTime() + Math.max(delay, retryAfter ?? 0) * MS_PER_SECOND);
}

/** The in-process delivery worker. */
export interface DeliveryWorker {
  /** This worker's lease owner id (unique per process start). */
  readonly owner: string;
  /** Starts polling. Idempotent. */
  start(): void;
  /**
   * Runs one round now and waits for its attempts: fans out the recorded events, claims due
   * deliveries (as many as free slots), makes their attempts and records the outcomes.
   * @returns how many deliveries it claimed.
   */
  runOnce(): Promise<number>;
  /**
   * Stops polling, waits for the attempts in flight (at most {@link STOP_WAIT_MS}), and releases
   * this worker's leases so that another instance claims those deliveries at once. An attempt
   * still in flight after the wait is not recorded; its delivery is attempted again (at least once).
   */
  stop(): Promise<void>;
}

/** Dependencies of {@link createDeliveryWorker}. */
export interface DeliveryWorkerDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly log: FastifyBaseLogger;
  /** The key of endpoint secrets at rest (KeyStore.webhookSecretKey). */
  readonly secretKey: Buffer;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS. */
  readonly allowPrivateNetworks: boolean;
  /** Counts attempts by outcome and their duration; defaults to a registry of its own. */
  readonly metrics?: AuthMetrics;
  /** An attempt's time limit in milliseconds (default {@link ATTEMPT_TIMEOUT_MS}; tests shorten it). */
  readonly attemptTimeoutMs?: number;
  /** How host names resolve (default `dns.lookup`; tests map names to addresses of their own). */
  readonly resolve?: Resolver;
  /** Attempts in flight at most (default {@link MAX_IN_FLIGHT}). */
  readonly maxInFlight?: number;
}

/**
 * Creates the worker that delivers events to webhook endpoints (docs/api.md#events-and-webhooks,
 * docs/operations.md "Webhook delivery"): it fans recorded events out into deliveries, claims due
 * deliveries under a lease (`FOR UPDATE SKIP LOCKED`, as the email outbox does), makes each
 * attempt outside any transaction, and records it: delivered on a 2xx; on a 410 dead and the
 * endpoint disabled; otherwise retried on {@link RETRY_SCHEDULE_SECONDS} (or `Retry-After` when
 * later), then dead. Only the lease holder records an attempt, so no attempt is recorded twice; a
 * worker that dies mid-attempt leaves the delivery to be claimed again when its lease ends (at
 * least once; receivers deduplicate by `webhook-id`).
 */
export function createDeliveryWorker(deps: DeliveryWorkerDeps): DeliveryWorker {
  const { db, clock, log, secretKey } = deps;
  const metrics = deps.metrics ?? createAuthMetrics();
  const maxInFlight = deps.maxInFlight ?? MAX_IN_FLIGHT;
  const sender: WebhookSender = createWebhookSender({
    allowPrivateNetworks: deps.allowPrivateNetworks,
    timeoutMs: deps.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS,
    ...(deps.resolve === undefined ? {} : { resolve: deps.resolve }),
  });
  const owner = `webhooks-${randomUUID()}`;
  const inFlight = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = true;
  /** The last claim filled every free slot, or the last fan-out was full: more may be due. */
  let backlog = false;

  /** The secrets that sign an attempt at `now`: the current one, then the previous one while it still signs. */
  const secretsOf = (row: ClaimedDelivery, now: Date): string[] | undefined => {
    const current = openSecret(secretKey, row.endpoint_id, row.secret);
    if (current === undefined) return undefined;
    const previousLive = row.previous_secret !== null && row.previous_secret_expires_at !== null && row.previous_secret_expires_at > now;
    const previous = previousLive ? openSecret(secretKey, row.endpoint_id, row.previous_secret!) : undefined;
    return previous === undefined ? [current] : [current, previous];
  };

  /** Makes one attempt of a claimed delivery and records it. Never throws. */
  const attempt = async (row: ClaimedDelivery): Promise<void> => {
    const started = clock.now();
    const timer0 = performance.now();
    const secrets = secretsOf(row, started);
    let record: AttemptRecord;
    if (secrets === undefined) {
      log.error({ webhookId: row.endpoint_id }, 'a webhook secret does not decrypt: WEBHOOK_KEY_FILE is not the key it was stored under');
      record = failure(row, started, { status: null, error: 'the endpoint secret does not decrypt (WEBHOOK_KEY_FILE)', retryAfter: undefined });
    } else {
      const timestamp = Math.floor(started.getTime() / MS_PER_SECOND);
      const body = JSON.stringify({ type: row.event_type, timestamp: row.occurred_at.toISOString(), data: row.data });
      const outcome = await sender.post(
        row.url,
        {
          'content-type': 'application/json',
          'user-agent': WEBHOOK_USER_AGENT,
          'webhook-id': row.event_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': webhookSignatureHeader(secrets, { id: row.event_id, timestamp, body }),
        },
        body,
      );
      const ended = clock.now();
      if (outcome.answered && isSuccess(outcome.status)) record = { outcome: 'delivered', at: started, status: outcome.status };
      else if (outcome.answered && outcome.status === GONE) record = { outcome: 'dead', at: started, status: GONE, error: null };
      else if (outcome.answered) record = failure(row, started, { status: outcome.status, error: null, retryAfter: retryAfterSeconds(outcome.retryAfter, ended), end: ended });
      else record = failure(row, started, { status: null, error: outcome.error, retryAfter: undefined, end: ended });
    }
    const gone = record.outcome === 'dead' && record.status === GONE;
    try {
      const recorded = gone
        ? await db.transaction(async (tx) => {
            const ok = await recordAttempt(tx, row.id, owner, record);
            if (ok) await disableGoneEndpoint(tx, row.endpoint_id, clock.now());
            return ok;
          })
        : await recordAttempt(db, row.id, owner, record);
      if (!recorded) {
        log.warn({ deliveryId: row.id, webhookId: row.endpoint_id }, 'webhook attempt not recorded: the lease was lost (another worker attempts it again)');
        return;
      }
    } catch (err) {
      log.error({ err, deliveryId: row.id }, 'webhook attempt bookkeeping failed; the delivery is attempted again when its lease ends');
      return;
    }
    metrics.webhookAttempt(record.outcome, (performance.now() - timer0) / MS_PER_SECOND);
    const fields = { deliveryId: row.id, webhookId: row.endpoint_id, eventId: row.event_id, attempts: row.attempts + 1 };
    if (record.outcome === 'delivered') log.debug({ ...fields, status: record.status }, 'webhook delivered');
    else if (gone) log.warn(fields, 'webhook endpoint answered 410 Gone: delivery dead, endpoint disabled');
    else log.warn({ ...fields, status: record.status, error: record.error, nextAttemptAt: record.outcome === 'retry' ? record.nextAttemptAt : undefined }, record.outcome === 'dead' ? 'webhook delivery dead' : 'webhook attempt failed; will retry');
  };

  /** The record of a failed attempt: a retry on the schedule, or dead when the schedule is over. */
  const failure = (row: ClaimedDelivery, at: Date, f: { status: number | null; error: string | null; retryAfter: number | undefined; end?: Date }): AttemptRecord => {
    const next = nextAttemptAt(row.schedule_attempts + 1, f.end ?? at, f.retryAfter);
    return next === null ? { outcome: 'dead', at, status: f.status, error: f.error } : { outcome: 'retry', at, status: f.status, error: f.error, nextAttemptAt: next };
  };

  /** Starts the attempt of `row` in a free slot; the slot is freed (and refilled when more is due) when it ends. */
  const launch = (row: ClaimedDelivery): void => {
    const task: Promise<void> = attempt(row).finally(() => {
      inFlight.delete(task);
      if (backlog) schedule(0);
    });
    inFlight.add(task);
  };

  /** Fans out, then claims as many due deliveries as there are free slots and launches them. @returns how many it claimed. */
  const round = async (): Promise<number> => {
    const now = clock.now();
    let fannedFull = false;
    for (let i = 0; i < MAX_FAN_OUT_BATCHES; i++) {
      fannedFull = (await fanOutEvents(db, { now, limit: FAN_OUT_BATCH })) === FAN_OUT_BATCH;
      if (!fannedFull) break;
    }
    const free = maxInFlight - inFlight.size;
    const rows = free > 0 ? await claimDueDeliveries(db, { owner, now, leaseUntil: new Date(now.getTime() + DELIVERY_LEASE_MS), limit: free }) : [];
    backlog = fannedFull || (free > 0 && rows.length === free);
    for (const row of rows) launch(row);
    return rows.length;
  };

  const rounds = oneAtATime(round);
  const runRound = rounds.run;

  const schedule = (delayMs: number): void => {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(tick, delayMs);
    timer.unref();
  };

  const tick = (): void => {
    timer = undefined;
    runRound()
      .then(() => schedule(backlog && inFlight.size < maxInFlight ? 0 : POLL_INTERVAL_MS))
      .catch((err: unknown) => {
        log.error({ err }, 'webhook delivery round failed');
        schedule(POLL_INTERVAL_MS);
      });
  };

  return {
    owner,
    start() {
      if (!stopped) return;
      stopped = false;
      schedule(0);
    },
    async runOnce() {
      const claimed = await runRound();
      await Promise.all([...inFlight]);
      return claimed;
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      let waited: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([rounds.inFlight(), ...inFlight]),
        new Promise((resolve) => (waited = setTimeout(resolve, STOP_WAIT_MS))),
      ]);
      clearTimeout(waited);
      await releaseDeliveryLeases(db, owner).catch(() => {});
      await sender.close().catch(() => {});
    },
  };
}
