import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { RetentionSettings } from '../../config.js';
import type { Db } from '../../db/db.js';
import type { AuthMetrics } from '../../metrics.js';
import { oneAtATime } from '../../one-at-a-time.js';
import { deleteExpiredUnverifiedUsers } from '../accounts/accounts.shared.js';
import { recordEvents } from '../events/events.shared.js';
import { purgeEvents, purgeFinishedDeliveries } from '../webhooks/webhooks.shared.js';
import { cancelEmailsTo } from '../mail/mail.shared.js';
import { BATCH_PAUSE_MS, MAX_BATCHES_PER_RUN, purgeInBatches, type BatchOptions } from '../../db/batches.js';
import { eraseExpiredSuccessors, purgeAdminAuditEntries, purgeDeadEmails, purgeEndedSessions, purgeEndedVerificationCodes, purgeExpiredMfaChallenges, purgeExpiredOAuthFlows, purgeExpiredWebauthnChallenges, purgeFinishedEmails } from './retention.repo.js';

/**
 * How often the purges run, in milliseconds. Retention is counted in days, so a row goes at
 * most this much later than its limit; a run with nothing to delete costs one index probe per
 * purge. The same period as the rate-limit purge (rate-limits.service.ts).
 */
export const RETENTION_INTERVAL_MS = 10 * 60 * 1000;
/**
 * How often sealed successors past the refresh grace window are erased, in milliseconds: a
 * seal outlives its window (at most 300 s, `REFRESH_REUSE_GRACE_SECONDS`) by at most this much.
 * Each run is one probe of `refresh_tokens_sealed_at_idx`, which holds only the rotations of the
 * last window, so running it this often costs nothing measurable (docs/performance.md,
 * "Retention and the cost of a growing database").
 */
export const SEAL_ERASE_INTERVAL_MS = 5_000;
/**
 * Rows per statement for the verification code, outbox and seal purges: a statement takes
 * milliseconds (docs/performance.md, "Retention and the cost of a growing database"), far
 * below the 5 s statement timeout (src/db/pg.ts), and holds its row locks as briefly.
 */
export const RETENTION_BATCH_SIZE = 1_000;
/**
 * Sessions per statement: each takes its refresh tokens (one per rotation) and usually its
 * device with it, so a batch deletes several times this many rows.
 */
export const SESSION_BATCH_SIZE = 250;

/** The reason recorded on the outbox rows cancelled when an unverified account expires. */
export const EXPIRED_UNVERIFIED_REASON = 'unverified account expired';
/**
 * Longest time {@link RetentionWorker.stop} waits for a run in flight, in milliseconds (real
 * time; the run stops after its current statement). Below the 10 s a shutdown may take
 * (src/serve.ts), beside the outbox worker's own wait.
 */
export const RETENTION_STOP_WAIT_MS = 3_000;

const MS_PER_DAY = 24 * 60 * 60 * 1000;
const MS_PER_SECOND = 1000;

/** What one run of the purges deleted. */
export interface RetentionReport {
  /** Sessions deleted (each with its refresh tokens). */
  sessions: number;
  /** Devices deleted with the last session that referred to them. */
  devices: number;
  verificationCodes: number;
  /** Second-step sign-in challenges deleted (expired ones, at once: they hold a copy of a password hash). */
  mfaChallenges: number;
  /** Expired passkey registration and sign-in challenges deleted (used ones are deleted when used). */
  webauthnChallenges: number;
  /** Expired identity-provider flows deleted (used or not). */
  oauthFlows: number;
  /** Sent and cancelled outbox rows deleted. */
  finishedEmails: number;
  deadEmails: number;
  /** Users deleted because their email was never verified in UNVERIFIED_ACCOUNT_TTL_SECONDS (each with its codes). */
  unverifiedUsers: number;
  /** Admin API audit entries deleted, RETENTION_ADMIN_AUDIT_DAYS after they were written. */
  adminAuditEntries: number;
  /** Delivered and dead webhook deliveries deleted. */
  webhookDeliveries: number;
  /** Webhook events deleted (fanned out, no delivery left). */
  webhookEvents: number;
  /** False when a purge stopped at {@link MAX_BATCHES_PER_RUN}, at a stop, or failed: the rest goes in a later run. */
  complete: boolean;
}

/** The retention worker of one process (docs/operations.md, "Retention"). */
export interface RetentionWorker {
  /** Starts the purges every {@link RETENTION_INTERVAL_MS} and the seal erasure every {@link SEAL_ERASE_INTERVAL_MS}. Idempotent. */
  start(): void;
  /** Runs every purge once now (after the run in flight, if any). A purge that fails is logged and the next one runs. */
  runOnce(): Promise<RetentionReport>;
  /**
   * Erases every sealed successor whose rotation is older than the grace window now, in
   * batches (after the erasure in flight, if any).
   * @returns how many seals were erased.
   * @throws the database's error.
   */
  eraseSealedSuccessors(): Promise<number>;
  /** Stops both timers and waits (at most {@link RETENTION_STOP_WAIT_MS}) for the work in flight, which ends after its current statement. */
  stop(): Promise<void>;
}

/** Dependencies of {@link createRetentionWorker}. */
export interface RetentionWorkerDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly log: FastifyBaseLogger;
  /** The retention periods (config.ts, RETENTION_*). */
  readonly retention: RetentionSettings;
  /** `REFRESH_REUSE_GRACE_SECONDS`: seals older than this are erased (0: every seal). */
  readonly refreshReuseGraceSeconds: number;
  /**
   * `UNVERIFIED_ACCOUNT_TTL_SECONDS`: users whose email was never verified are deleted this long
   * after sign-up (docs/api.md#unverified-accounts-expire); undefined leaves them (the contract
   * tests of the other purges).
   */
  readonly unverifiedAccountTtlSeconds?: number | undefined;
  /** Counts the accounts it deletes (`auth_accounts_deleted_total{cause="unverified_expired"}`). */
  readonly metrics?: Pick<AuthMetrics, 'accountsDeleted'> | undefined;
  /** Batch sizes, cap and pause; the constants above and those of src/db/batches.ts by default (tests use small batches and no pause). */
  readonly batches?: Partial<{ batchSize: number; sessionBatchSize: number; maxBatches: number; pauseMs: number }>;
}

/**
 * Creates the worker that keeps every table bounded (docs/operations.md, "Retention"): ended
 * sessions with their refresh tokens and devices, ended verification codes, finished and dead
 * outbox rows after their periods, delivered and dead webhook deliveries and the events no
 * delivery needs any more after theirs, admin API audit entries after theirs, and sealed
 * successors once their grace window passed. Every
 * purge runs in bounded statements under an index (retention.repo.ts, {@link purgeInBatches}),
 * so several instances may run it at once on one database. Rate-limit windows keep their own
 * purge (rate-limits.service.ts).
 */
export function createRetentionWorker(deps: RetentionWorkerDeps): RetentionWorker {
  const { db, clock, log, retention, refreshReuseGraceSeconds } = deps;
  const batchSize = deps.batches?.batchSize ?? RETENTION_BATCH_SIZE;
  const sessionBatchSize = deps.batches?.sessionBatchSize ?? SESSION_BATCH_SIZE;
  const maxBatches = deps.batches?.maxBatches ?? MAX_BATCHES_PER_RUN;
  const pauseMs = deps.batches?.pauseMs ?? BATCH_PAUSE_MS;
  let stopped = true;
  let purgeTimer: NodeJS.Timeout | undefined;
  let eraseTimer: NodeJS.Timeout | undefined;
  /** True while the scheduled seal erasure keeps failing: only the first failure of an outage is logged, then the recovery. */
  let eraseFailing = false;

  /** Incremented by stop(): work started before ends after its current statement; work started after runs to its end. */
  let generation = 0;
  const options = (size: number, own: number): BatchOptions => ({ batchSize: size, maxBatches, pauseMs, stopping: () => generation !== own });

  const before = (now: Date, days: number): Date => new Date(now.getTime() - days * MS_PER_DAY);

  const purgeAll = async (): Promise<RetentionReport> => {
    const now = clock.now();
    const own = generation;
    const report: RetentionReport = {
      sessions: 0,
      devices: 0,
      verificationCodes: 0,
      mfaChallenges: 0,
      webauthnChallenges: 0,
      oauthFlows: 0,
      finishedEmails: 0,
      deadEmails: 0,
      unverifiedUsers: 0,
      webhookDeliveries: 0,
      webhookEvents: 0,
      adminAuditEntries: 0,
      complete: true,
    };
    const run = async (name: string, purge: (limit: number) => Promise<number>, size: number): Promise<number> => {
      try {
        // After a stop, the purges not yet begun are skipped too.
        if (generation !== own) {
          report.complete = false;
          return 0;
        }
        const outcome = await purgeInBatches(purge, options(size, own));
        if (!outcome.complete) report.complete = false;
        return outcome.rows;
      } catch (err) {
        report.complete = false;
        log.warn({ err, purge: name }, 'retention purge failed; the next run tries again');
        return 0;
      }
    };
    // First, so that the codes of the users it deletes go with them (ON DELETE CASCADE). In the
    // same transaction the emails still queued to their addresses are cancelled: a resend or a
    // password reset asked for near the deadline queues one that has not expired yet, and it must
    // not go out for an account that no longer exists. One indexed statement per deleted address
    // (email_outbox_recipient_idx), at most a batch of them per transaction.
    const unverifiedTtl = deps.unverifiedAccountTtlSeconds;
    if (unverifiedTtl !== undefined) {
      const signedUpBefore = new Date(now.getTime() - unverifiedTtl * MS_PER_SECOND);
      report.unverifiedUsers = await run(
        'unverified_users',
        async (limit) => {
          const n = await db.transaction(async (tx) => {
            const deleted = await deleteExpiredUnverifiedUsers(tx, { createdBefore: signedUpBefore, limit });
            // One `user.deleted` event per deleted user, in one INSERT (docs/api.md#event-types).
            await recordEvents(tx, deleted.map((user) => ({ type: 'user.deleted', data: { user_id: user.id, cause: 'unverified_expired' } })), now);
            for (const user of deleted) {
              if (user.email !== null) await cancelEmailsTo(tx, { recipient: user.email, reason: EXPIRED_UNVERIFIED_REASON, now });
            }
            return deleted.length;
          });
          deps.metrics?.accountsDeleted('unverified_expired', n);
          return n;
        },
        sessionBatchSize,
      );
    }
    const sessionsBefore = before(now, retention.sessionsDays);
    report.sessions = await run(
      'sessions',
      async (limit) => {
        const purged = await purgeEndedSessions(db, sessionsBefore, limit);
        report.devices += purged.devices;
        return purged.sessions;
      },
      sessionBatchSize,
    );
    const codesBefore = before(now, retention.verificationCodesDays);
    report.verificationCodes = await run('verification_codes', (limit) => purgeEndedVerificationCodes(db, codesBefore, limit), batchSize);
    report.mfaChallenges = await run('mfa_challenges', (limit) => purgeExpiredMfaChallenges(db, now, limit), batchSize);
    report.webauthnChallenges = await run('webauthn_challenges', (limit) => purgeExpiredWebauthnChallenges(db, now, limit), batchSize);
    report.oauthFlows = await run('oauth_flows', (limit) => purgeExpiredOAuthFlows(db, now, limit), batchSize);
    const finishedBefore = before(now, retention.outboxDays);
    report.finishedEmails = await run('email_outbox', (limit) => purgeFinishedEmails(db, finishedBefore, limit), batchSize);
    const deadBefore = before(now, retention.outboxDeadDays);
    report.deadEmails = await run('email_outbox_dead', (limit) => purgeDeadEmails(db, deadBefore, limit), batchSize);
    // Webhook deliveries first, so that the events they kept can go in the same run.
    const deliveredBefore = before(now, retention.webhookDays);
    report.webhookDeliveries = await run('webhook_deliveries', (limit) => purgeFinishedDeliveries(db, { status: 'delivered', before: deliveredBefore, limit }), batchSize);
    const deadDeliveriesBefore = before(now, retention.webhookDeadDays);
    report.webhookDeliveries += await run('webhook_deliveries_dead', (limit) => purgeFinishedDeliveries(db, { status: 'dead', before: deadDeliveriesBefore, limit }), batchSize);
    report.webhookEvents = await run('webhook_events', (limit) => purgeEvents(db, { before: deliveredBefore, limit }), batchSize);
    const auditBefore = before(now, retention.adminAuditDays);
    report.adminAuditEntries = await run('admin_audit_log', (limit) => purgeAdminAuditEntries(db, auditBefore, limit), batchSize);
    const deleted =
      report.unverifiedUsers + report.sessions + report.devices + report.verificationCodes + report.mfaChallenges + report.webauthnChallenges + report.oauthFlows + report.finishedEmails + report.deadEmails + report.webhookDeliveries + report.webhookEvents + report.adminAuditEntries;
    if (deleted > 0 || !report.complete) log.info({ retention: report }, 'retention purge');
    return report;
  };

  const eraseAll = async (): Promise<number> => {
    const cutoff = new Date(clock.now().getTime() - refreshReuseGraceSeconds * MS_PER_SECOND);
    const outcome = await purgeInBatches((limit) => eraseExpiredSuccessors(db, cutoff, limit), options(batchSize, generation));
    return outcome.rows;
  };

  // A call while a run is in flight waits for it and then runs afresh, with the clock's time at
  // its own start (as the outbox worker's runOnce does).
  const purges = oneAtATime(purgeAll);
  const erasures = oneAtATime(eraseAll);
  const runOnce = purges.run;
  const eraseSealedSuccessors = erasures.run;

  const schedulePurge = (): void => {
    if (stopped) return;
    clearTimeout(purgeTimer);
    purgeTimer = setTimeout(() => {
      runOnce()
        .catch((err: unknown) => log.warn({ err }, 'retention run failed'))
        .finally(schedulePurge);
    }, RETENTION_INTERVAL_MS);
    purgeTimer.unref();
  };

  const scheduleErase = (): void => {
    if (stopped) return;
    clearTimeout(eraseTimer);
    eraseTimer = setTimeout(() => {
      eraseSealedSuccessors()
        .then((erased) => {
          if (eraseFailing) log.info('sealed successor erasure works again');
          eraseFailing = false;
          if (erased > 0) log.debug({ erased }, 'sealed successors erased');
        })
        .catch((err: unknown) => {
          if (!eraseFailing) log.warn({ err }, 'sealed successor erasure failed; retrying every few seconds');
          eraseFailing = true;
        })
        .finally(scheduleErase);
    }, SEAL_ERASE_INTERVAL_MS);
    eraseTimer.unref();
  };

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      schedulePurge();
      scheduleErase();
    },
    runOnce,
    eraseSealedSuccessors,
    async stop() {
      stopped = true;
      generation++;
      clearTimeout(purgeTimer);
      clearTimeout(eraseTimer);
      purgeTimer = undefined;
      eraseTimer = undefined;
      const inFlight = [purges.inFlight(), erasures.inFlight()].filter((p) => p !== undefined);
      if (inFlight.length === 0) return;
      let waited: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(inFlight), new Promise((resolve) => (waited = setTimeout(resolve, RETENTION_STOP_WAIT_MS)))]);
      clearTimeout(waited);
    },
  };
}
