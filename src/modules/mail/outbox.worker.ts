import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { createAuthMetrics, type AuthMetrics } from '../../metrics.js';
import { oneAtATime } from '../../one-at-a-time.js';
import { passwordResetEmail, emailChangeEmail, passwordResetLink, securityNoticeEmail, verificationEmail } from './mail.templates.js';
import { MailSendError, type MailTransport } from './mail.transport.js';
import { cancelExpiredEmails, claimDueEmails, markCancelled, markFailed, markSent, markSuppressed, releaseLeases, type ClaimedEmail } from './outbox.repo.js';

/** After this many failed attempts a row is dead (docs/decisions.md#email-outbox). */
export const MAX_SEND_ATTEMPTS = 10;
/** First retry delay; doubles per attempt (docs/decisions.md#email-outbox: about 2 s doubling). */
export const BACKOFF_BASE_MS = 2_000;
/** Longest retry delay (docs/decisions.md#email-outbox: capped at 10 min). */
export const BACKOFF_CAP_MS = 600_000;
/** How long a claimed row stays leased: longer than the worst SMTP send (connection + greeting + socket timeouts). */
export const LEASE_MS = 60_000;
/** Rows claimed per round; they are sent in parallel so one slow message does not hold up the others. */
export const CLAIM_BATCH = 10;
/** Idle polling period; a sign-up or resend in this process nudges the worker at once. */
export const POLL_INTERVAL_MS = 1_000;
/**
 * Longest time {@link OutboxWorker.stop} waits for the round in flight before it releases its
 * leases anyway, in milliseconds (real time: it bounds a process shutdown). A healthy SMTP send
 * takes well under a second; a hung relay would otherwise hold the shutdown for the SMTP
 * timeouts (up to 40 s), beyond the 10 s the service gives itself to exit (src/serve.ts).
 */
export const STOP_WAIT_MS = 3_000;

/** `last_error` of a suppressed password-reset request, as `outbox list` shows it (docs/operations.md). */
export const NO_ACCOUNT_REASON = 'no account has this address: nothing was sent';

/**
 * Delay before retry number `attempt` (1-based): exponential with "equal jitter", i.e. a uniform
 * draw from [d/2, d] where d = min(cap, base * 2^(attempt-1)). Jitter spreads retries of many
 * rows that failed together (AWS Architecture Blog, "Exponential Backoff and Jitter").
 */
export function retryDelayMs(attempt: number, random: () => number = Math.random): number {
  const d = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, attempt - 1));
  return Math.round(d / 2 + random() * (d / 2));
}

/**
 * "What to send" for a claimed row: a notice from its stated facts, a verification email from its
 * code; undefined for a verification row whose code was dropped (it can no longer be sent).
 */
function contentOf(row: Exclude<ClaimedEmail, { kind: 'password_reset_request' }>, now: Date, passwordResetUrl: string | undefined): { subject: string; text: string } | undefined {
  if (row.kind === 'notice') {
    const p = row.payload;
    return securityNoticeEmail({ kind: p.notice, username: p.username, at: new Date(p.at), ip: p.ip, userAgent: p.user_agent, details: p.details ?? [] });
  }
  const { code, username } = row.payload;
  if (code === undefined) return undefined;
  const expiresInSeconds = row.expires_at === null ? 0 : (row.expires_at.getTime() - now.getTime()) / 1000;
  if (row.kind === 'password_reset') {
    const link = passwordResetUrl === undefined ? undefined : passwordResetLink(passwordResetUrl, row.recipient, code);
    return passwordResetEmail({ username, code, expiresInSeconds, link });
  }
  if (row.kind === 'email_change') return emailChangeEmail({ username, code, expiresInSeconds });
  return verificationEmail({ username, code, expiresInSeconds });
}

/** The in-process outbox worker. */
export interface OutboxWorker {
  /** This worker's lease owner id (unique per process start). */
  readonly owner: string;
  /** Starts polling. Idempotent. */
  start(): void;
  /** Asks for a round soon (after a commit that queued an email). */
  nudge(): void;
  /**
   * Runs one round now: cancels expired rows, claims due rows, sends them, records outcomes.
   * @returns how many rows it claimed.
   */
  runOnce(): Promise<number>;
  /**
   * Stops polling, waits for the round in flight (at most {@link STOP_WAIT_MS}), and releases
   * this worker's leases, so that another instance claims those rows at once instead of after
   * the lease. A send still in flight after the wait may complete; its row, no longer leased by
   * this worker, is then not recorded as sent and is sent again by another worker (at least
   * once, same Message-ID).
   */
  stop(): Promise<void>;
}

/** Dependencies of {@link createOutboxWorker}. */
export interface OutboxWorkerDeps {
  readonly db: Db;
  readonly transport: MailTransport;
  readonly clock: Clock;
  readonly log: FastifyBaseLogger;
  /** Counts sent and failed emails; defaults to a registry of its own. */
  readonly metrics?: AuthMetrics;
  /** PASSWORD_RESET_URL: reset emails also carry a link to it; undefined: the code only. */
  readonly passwordResetUrl?: string | undefined;
  /**
   * The work of a `password_reset_request` row, inside the worker's transaction `tx`: for a known
   * address, issue the reset code and queue its email, and resolve true (the row is then marked
   * `sent`); for an unknown one, nothing, and resolve false (the row is marked `suppressed`).
   * Undefined: such rows fail like a failed send (retried, then dead).
   */
  readonly passwordResetRequest?: ((tx: Queryable, email: string) => Promise<boolean>) | undefined;
}

/**
 * Creates the worker that drains `email_outbox` (docs/decisions.md#email-outbox): claims due rows with
 * `FOR UPDATE SKIP LOCKED` under a lease, sends outside any transaction, and records
 * `sent`, a retry with backoff, or `dead`. Delivery is at least once: a process that dies
 * after sending and before recording leaves the row to be claimed again when its lease ends.
 */
export function createOutboxWorker(deps: OutboxWorkerDeps): OutboxWorker {
  const { db, transport, clock, log } = deps;
  const metrics = deps.metrics ?? createAuthMetrics();
  const owner = `worker-${randomUUID()}`;
  let timer: NodeJS.Timeout | undefined;
  let again = false;
  let stopped = true;

  /** Records a failed attempt of `row`: a retry with backoff, or dead. */
  const failed = async (row: ClaimedEmail, err: unknown): Promise<void> => {
    const attempt = row.attempts + 1;
    const permanent = err instanceof MailSendError && err.permanent;
    const dead = permanent || attempt >= MAX_SEND_ATTEMPTS;
    const error = err instanceof Error ? err.message : String(err);
    const retryAt = dead ? null : new Date(clock.now().getTime() + retryDelayMs(attempt));
    metrics.emailFailed(dead ? 'dead' : 'retry');
    await markFailed(db, row.id, owner, { error, retryAt });
    log.warn({ outboxId: row.id, attempts: attempt, dead, error }, dead ? 'email dead' : 'email send failed; will retry');
  };

  /**
   * A password-reset request: its work and the row's outcome commit in one transaction, so a
   * crash or a database error leaves the row pending for a retry (never a half-done request).
   * The outcome is `sent` when a code and its email were queued, `suppressed` when the address
   * has no account (nothing was sent: `outbox list` must not say otherwise).
   * Logs the row id only, never the address or a code.
   */
  const handleResetRequest = async (row: ClaimedEmail): Promise<void> => {
    let issued: boolean;
    try {
      const handler = deps.passwordResetRequest;
      if (handler === undefined) throw new Error('no handler for password-reset requests');
      issued = await db.transaction(async (tx) => {
        const queued = await handler(tx, row.recipient);
        const recorded = queued ? await markSent(tx, row.id, owner, clock.now()) : await markSuppressed(tx, row.id, owner, NO_ACCOUNT_REASON);
        if (!recorded) throw new Error('lease lost');
        return queued;
      });
    } catch (err) {
      await failed(row, err);
      return;
    }
    again = true;
    if (!issued) metrics.emailSuppressed('no_account');
    log.info({ outboxId: row.id, outcome: issued ? 'sent' : 'suppressed' }, issued ? 'password-reset request done: code queued' : 'password-reset request done: no account, nothing sent');
  };

  const deliver = async (row: ClaimedEmail): Promise<void> => {
    const now = clock.now();
    if (row.expires_at !== null && row.expires_at <= now) {
      await markCancelled(db, row.id, owner, 'expired before delivery');
      return;
    }
    if (row.kind === 'password_reset_request') {
      await handleResetRequest(row);
      return;
    }
    const content = contentOf(row, now, deps.passwordResetUrl);
    if (content === undefined) {
      await markCancelled(db, row.id, owner, 'no code in payload');
      return;
    }
    try {
      await transport.send({ messageId: `<${row.id}@latchkey>`, to: row.recipient, ...content });
    } catch (err) {
      await failed(row, err);
      return;
    }
    // Outside the try: if recording fails after a successful send, the lease runs out and the
    // row is sent again (at least once, same Message-ID) rather than counted as a failure.
    metrics.emailSent();
    await markSent(db, row.id, owner, clock.now());
    log.info({ outboxId: row.id, attempts: row.attempts + 1 }, 'email sent');
  };

  const round = async (): Promise<number> => {
    const now = clock.now();
    await cancelExpiredEmails(db, now);
    const rows = await claimDueEmails(db, { owner, now, leaseUntil: new Date(now.getTime() + LEASE_MS), limit: CLAIM_BATCH });
    await Promise.all(rows.map((row) => deliver(row).catch((err: unknown) => log.error({ err, outboxId: row.id }, 'outbox delivery bookkeeping failed'))));
    return rows.length;
  };

  const rounds = oneAtATime(round);
  const runOnce = rounds.run;

  const schedule = (delayMs: number): void => {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(tick, delayMs);
    timer.unref();
  };

  const tick = (): void => {
    timer = undefined;
    runOnce()
      .then((claimed) => schedule(claimed === CLAIM_BATCH || again ? 0 : POLL_INTERVAL_MS))
      .catch((err: unknown) => {
        log.error({ err }, 'outbox round failed');
        schedule(POLL_INTERVAL_MS);
      })
      .finally(() => (again = false));
  };

  return {
    owner,
    start() {
      if (!stopped) return;
      stopped = false;
      schedule(0);
    },
    nudge() {
      if (stopped) return;
      if (rounds.inFlight() !== undefined) again = true;
      else schedule(0);
    },
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      const deadline = Date.now() + STOP_WAIT_MS;
      for (let inFlight = rounds.inFlight(); inFlight !== undefined && Date.now() < deadline; inFlight = rounds.inFlight()) {
        let waited: NodeJS.Timeout | undefined;
        await Promise.race([inFlight, new Promise((resolve) => (waited = setTimeout(resolve, deadline - Date.now())))]);
        clearTimeout(waited);
      }
      await releaseLeases(db, owner).catch(() => {});
    },
  };
}
