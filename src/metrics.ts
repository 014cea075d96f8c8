import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RevocationReason } from './modules/sessions/sessions.shared.js';

/** How a sign-in ended: `locked` is the 429 of a rate limit (decisions.md, "Rate limits"). */
export type SignInOutcome = 'success' | 'bad_credentials' | 'unverified' | 'banned' | 'locked' | 'mfa_required';

/**
 * How a refresh ended: a new token (`rotated`), the live token given back within the grace
 * window (`grace_replay`), a rotated token presented again (`reused`, the session is revoked),
 * an unknown token or an ended session (`invalid`), or no cookie at all (`missing`: a browser
 * app probing for a session, kept apart so that it does not drown real `invalid` tokens).
 */
export type RefreshOutcome = 'rotated' | 'grace_replay' | 'reused' | 'invalid' | 'missing';

/** A password-reset request accepted (known address or not: the count reveals no account), or a reset completed. */
export type PasswordResetOutcome = 'requested' | 'completed';
/** Outcomes of `auth_mfa_sign_in_total`: the second step of a sign-in. */
export type MfaSignInOutcome = 'totp' | 'recovery_code' | 'invalid_code' | 'challenge_expired' | 'locked';
/**
 * Outcomes of `auth_passkey_sign_in_total`: signed in, a response that did not verify (or an
 * unknown, used or expired challenge), no challenge cookie, an unverified email, a rate limit.
 */
export type PasskeySignInOutcome = 'success' | 'invalid_response' | 'missing_challenge' | 'unverified' | 'locked';
/** Changes counted by `auth_passkey_changes_total`. */
export type PasskeyChange = 'registered' | 'deleted';
/** Outcomes of `auth_email_changes_total`: a code sent to a new address, or the address replaced. */
export type EmailChangeOutcome = 'requested' | 'completed';
/**
 * Why accounts were deleted: by their owner (delete-account), by an operator (`latchkey users
 * delete`), or by the retention worker (an email never verified in UNVERIFIED_ACCOUNT_TTL_SECONDS).
 */
export type AccountDeletionCause = 'owner' | 'operator' | 'unverified_expired';

/** What became of a failed send: another try later, or the row is dead (docs/decisions.md#email-outbox). */
export type EmailFailureOutcome = 'retry' | 'dead';

/** Why an outbox row finished without an email (status `suppressed`): a password-reset request for an address no account has. */
export type EmailSuppressionReason = 'no_account';

/**
 * The outbox row statuses (docs/decisions.md#email-outbox) that `auth_outbox_emails` reports, each a series:
 * the backlog and the rows given up. Sent and cancelled rows are not counted: they are most of
 * the table, and counting them made every scrape read all of it (docs/performance.md,
 * "Retention and the cost of a growing database"); `auth_emails_sent_total` counts sends.
 */
export const OUTBOX_STATUSES = ['pending', 'dead'] as const;
export type OutboxStatusLabel = (typeof OUTBOX_STATUSES)[number];

/**
 * How a scrape reads a backlog (the email outbox, webhook deliveries); each gauge runs its own
 * query, so a value is never one scrape old.
 */
export interface BacklogReader {
  /** Rows per status (pending, dead); a status with no rows may be absent. */
  counts(): Promise<Partial<Record<OutboxStatusLabel, number>>>;
  /** Age in seconds of the oldest pending row, 0 when none is pending. */
  oldestPendingAgeSeconds(): Promise<number>;
}
/** How a scrape reads the outbox. */
export type OutboxReader = BacklogReader;

/**
 * What became of a webhook attempt (`auth_webhook_attempts_total{outcome}`): its delivery
 * delivered, retried later, or dead (the schedule over, or a 410).
 */
export type WebhookAttemptOutcome = 'delivered' | 'retry' | 'dead';

/**
 * Attempt duration buckets in seconds: from a local receiver (~1 ms) to the 10 s time limit of
 * an attempt (docs/api.md#retries).
 */
export const WEBHOOK_ATTEMPT_BUCKETS_SECONDS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** One finished HTTP request, as the request hook reports it. */
export interface HttpObservation {
  readonly method: string;
  /** The route pattern (`/auth/v0/sessions/:session_id`), never the raw URL; `unmatched` for 404s. */
  readonly route: string;
  readonly status: number;
  readonly durationSeconds: number;
}

/**
 * Latency buckets in seconds: from a cached JWKS answer (~1 ms) to an argon2id sign-in under
 * load (~0.1 to 1 s), up to the 10 s beyond which a client has given up anyway.
 */
export const HTTP_DURATION_BUCKETS_SECONDS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Prefix of the service's own metric names (process and Node.js defaults keep theirs). */
const PREFIX = 'auth_';

/**
 * The service's Prometheus metrics in a registry of their own, so several
 * apps in one process (tests) never share or clash. Services receive this object as a
 * dependency and call it where an outcome is decided; `GET /metrics` serialises `registry`.
 */
export interface AuthMetrics {
  readonly registry: Registry;
  /** Counts a sign-in outcome (`auth_sign_in_total{outcome}`). */
  signIn(outcome: SignInOutcome): void;
  /** Counts a refresh outcome (`auth_refresh_total{outcome}`). */
  refresh(outcome: RefreshOutcome): void;
  /** Counts sessions that a call revoked (`auth_sessions_revoked_total{cause}`); `count` 0 counts nothing. */
  sessionsRevoked(cause: Exclude<RevocationReason, 'revoked_by_admin'>, count?: number): void;
  /** Counts a password-reset outcome (`auth_password_resets_total{outcome}`). */
  passwordReset(outcome: PasswordResetOutcome): void;
  /** Counts a second sign-in step's outcome (`auth_mfa_sign_in_total{outcome}`). */
  mfaSignIn(outcome: MfaSignInOutcome): void;
  /** Counts a passkey sign-in's outcome (`auth_passkey_sign_in_total{outcome}`). */
  passkeySignIn(outcome: PasskeySignInOutcome): void;
  /** Counts a passkey registered or deleted (`auth_passkey_changes_total{change}`). */
  passkeyChange(change: PasskeyChange): void;
  /** Counts an email-change outcome (`auth_email_changes_total{outcome}`). */
  emailChange(outcome: EmailChangeOutcome): void;
  /** Counts deleted accounts (`auth_accounts_deleted_total{cause}`); `count` 0 counts nothing. */
  accountsDeleted(cause: AccountDeletionCause, count?: number): void;
  /** Counts an email accepted by the SMTP server (`auth_emails_sent_total`). */
  emailSent(): void;
  /** Counts a failed send (`auth_emails_failed_total{outcome}`). */
  emailFailed(outcome: EmailFailureOutcome): void;
  /** Counts an outbox row finished without an email, there being nothing to send (`auth_emails_suppressed_total{reason}`). */
  emailSuppressed(reason: EmailSuppressionReason): void;
  /** Records one HTTP request (`auth_http_requests_total`, `auth_http_request_duration_seconds`). */
  observeHttp(observation: HttpObservation): void;
  /**
   * Makes every scrape read the outbox through `reader` (`auth_outbox_emails{status}`,
   * `auth_outbox_oldest_pending_age_seconds`). When a read fails (database down), the scrape
   * still succeeds, with no `auth_outbox_emails` samples and the age NaN, and `onError` is told why.
   */
  trackOutbox(reader: OutboxReader, onError: (err: unknown) => void): void;
  /** Counts a webhook attempt by outcome and observes its duration (`auth_webhook_attempts_total{outcome}`, `auth_webhook_attempt_duration_seconds`). */
  webhookAttempt(outcome: WebhookAttemptOutcome, durationSeconds: number): void;
  /**
   * Makes every scrape read the webhook deliveries through `reader` (`auth_webhook_deliveries{status}`:
   * pending to enabled endpoints, and dead; `auth_webhook_oldest_pending_age_seconds`), as
   * {@link trackOutbox} does for the outbox.
   */
  trackWebhooks(reader: BacklogReader, onError: (err: unknown) => void): void;
  /**
   * Makes every scrape read the verified-access-token cache through `stats`
   * (`auth_access_token_cache_entries`, `auth_access_token_verifications_total{result}` with
   * `result` `cached` or `verified`): nothing is counted per request.
   */
  trackAccessTokenCache(stats: () => { readonly entries: number; readonly hits: number; readonly verifications: number }): void;
}

/**
 * Creates the metrics of one app in a fresh {@link Registry}.
 * @param options.defaultMetrics also collect prom-client's process and Node.js metrics (CPU,
 *   memory, event-loop lag, GC, handles) into this registry; buildApp turns it on.
 */
export function createAuthMetrics(options: { readonly defaultMetrics?: boolean } = {}): AuthMetrics {
  const registry = new Registry();
  if (options.defaultMetrics === true) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const httpRequests = new Counter({
    name: `${PREFIX}http_requests_total`,
    help: 'HTTP requests answered, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status_code'] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: `${PREFIX}http_request_duration_seconds`,
    help: 'Time from receiving a request to the end of its answer, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [...HTTP_DURATION_BUCKETS_SECONDS],
    registers,
  });
  const signIns = new Counter({
    name: `${PREFIX}sign_in_total`,
    help: 'Sign-in attempts by outcome: success, bad_credentials, unverified (email not verified), locked (rate limited), mfa_required (the password was right; a second factor is asked for).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const refreshes = new Counter({
    name: `${PREFIX}refresh_total`,
    help: 'Refresh attempts by outcome: rotated, grace_replay, reused (session revoked), invalid, missing (no cookie).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const revoked = new Counter({
    name: `${PREFIX}sessions_revoked_total`,
    help: 'Sessions revoked, by cause: logout, revoked_by_user, revoke_all, password_changed, password_reset, refresh_token_reuse.',
    labelNames: ['cause'] as const,
    registers,
  });
  const passwordResets = new Counter({
    name: `${PREFIX}password_resets_total`,
    help: 'Password resets by outcome: requested (accepted requests, known address or not), completed (password replaced).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const mfaSignIns = new Counter({
    name: `${PREFIX}mfa_sign_in_total`,
    help: 'Second sign-in steps by outcome: totp, recovery_code (signed in), invalid_code, challenge_expired (missing, dead or expired challenge), locked (rate limited).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const passkeySignIns = new Counter({
    name: `${PREFIX}passkey_sign_in_total`,
    help: 'Passkey sign-ins by outcome: success, invalid_response (did not verify, or an unknown, used or expired challenge), missing_challenge, unverified (email not verified), locked (rate limited).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const passkeyChanges = new Counter({
    name: `${PREFIX}passkey_changes_total`,
    help: 'Passkeys registered and deleted by their owners (an account deletion removes its passkeys without counting here).',
    labelNames: ['change'] as const,
    registers,
  });
  const emailChanges = new Counter({
    name: `${PREFIX}email_changes_total`,
    help: 'Email changes by outcome: requested (a code sent to the new address), completed (the address replaced).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const accountsDeleted = new Counter({
    name: `${PREFIX}accounts_deleted_total`,
    help: 'Accounts deleted, by cause: owner (delete-account), operator (users delete), unverified_expired (retention).',
    labelNames: ['cause'] as const,
    registers,
  });
  const emailsSent = new Counter({ name: `${PREFIX}emails_sent_total`, help: 'Emails accepted by the SMTP server (or the log transport).', registers });
  const emailsFailed = new Counter({
    name: `${PREFIX}emails_failed_total`,
    help: 'Failed email sends, by outcome: retry (scheduled again) or dead (given up).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const emailsSuppressed = new Counter({
    name: `${PREFIX}emails_suppressed_total`,
    help: 'Outbox rows finished without an email, there being nothing to send, by reason: no_account (a password-reset request for an address no account has).',
    labelNames: ['reason'] as const,
    registers,
  });

  const webhookAttempts = new Counter({
    name: `${PREFIX}webhook_attempts_total`,
    help: 'Webhook delivery attempts by outcome: delivered (a 2xx), retry (failed, scheduled again), dead (failed after the last retry, or answered 410).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const webhookAttemptDuration = new Histogram({
    name: `${PREFIX}webhook_attempt_duration_seconds`,
    help: 'Time from the start of a webhook attempt to its outcome (an answer, a refusal, an error or the time limit).',
    buckets: [...WEBHOOK_ATTEMPT_BUCKETS_SECONDS],
    registers,
  });

  /**
   * The two gauges of a backlog read at scrape time: `<name>{status}` and
   * `<ageName>`; when a read fails the counts have no sample, the age is NaN, and `onError` is told.
   */
  const backlogGauges = (names: { counts: string; countsHelp: string; age: string; ageHelp: string }, reader: BacklogReader, onError: (err: unknown) => void): void => {
    new Gauge({
      name: `${PREFIX}${names.counts}`,
      help: names.countsHelp,
      labelNames: ['status'] as const,
      registers,
      async collect() {
        this.reset();
        let counts: Partial<Record<OutboxStatusLabel, number>>;
        try {
          counts = await reader.counts();
        } catch (err) {
          onError(err);
          return;
        }
        for (const status of OUTBOX_STATUSES) this.set({ status }, counts[status] ?? 0);
      },
    });
    new Gauge({
      name: `${PREFIX}${names.age}`,
      help: names.ageHelp,
      registers,
      async collect() {
        try {
          this.set(await reader.oldestPendingAgeSeconds());
        } catch (err) {
          // Unknown (NaN) while the backlog cannot be read: a gauge without labels always has a sample.
          this.set(Number.NaN);
          onError(err);
        }
      },
    });
  };

  // Zero-valued series from the start, so rate() and alerts see every outcome before it first happens.
  for (const outcome of ['success', 'bad_credentials', 'unverified', 'banned', 'locked', 'mfa_required'] satisfies SignInOutcome[]) signIns.inc({ outcome }, 0);
  for (const outcome of ['rotated', 'grace_replay', 'reused', 'invalid', 'missing'] satisfies RefreshOutcome[]) refreshes.inc({ outcome }, 0);
  for (const outcome of ['retry', 'dead'] satisfies EmailFailureOutcome[]) emailsFailed.inc({ outcome }, 0);
  for (const reason of ['no_account'] satisfies EmailSuppressionReason[]) emailsSuppressed.inc({ reason }, 0);
  for (const cause of ['owner', 'operator', 'unverified_expired'] satisfies AccountDeletionCause[]) accountsDeleted.inc({ cause }, 0);
  for (const outcome of ['requested', 'completed'] satisfies PasswordResetOutcome[]) passwordResets.inc({ outcome }, 0);
  for (const outcome of ['requested', 'completed'] satisfies EmailChangeOutcome[]) emailChanges.inc({ outcome }, 0);
  for (const outcome of ['totp', 'recovery_code', 'invalid_code', 'challenge_expired', 'locked'] satisfies MfaSignInOutcome[]) mfaSignIns.inc({ outcome }, 0);
  for (const outcome of ['success', 'invalid_response', 'missing_challenge', 'unverified', 'locked'] satisfies PasskeySignInOutcome[]) passkeySignIns.inc({ outcome }, 0);
  for (const change of ['registered', 'deleted'] satisfies PasskeyChange[]) passkeyChanges.inc({ change }, 0);
  for (const outcome of ['delivered', 'retry', 'dead'] satisfies WebhookAttemptOutcome[]) webhookAttempts.inc({ outcome }, 0);

  return {
    registry,
    signIn: (outcome) => signIns.inc({ outcome }),
    refresh: (outcome) => refreshes.inc({ outcome }),
    sessionsRevoked: (cause, count = 1) => {
      if (count > 0) revoked.inc({ cause }, count);
    },
    passwordReset: (outcome) => passwordResets.inc({ outcome }),
    emailChange: (outcome) => emailChanges.inc({ outcome }),
    mfaSignIn: (outcome) => mfaSignIns.inc({ outcome }),
    passkeySignIn: (outcome) => passkeySignIns.inc({ outcome }),
    passkeyChange: (change) => passkeyChanges.inc({ change }),
    accountsDeleted: (cause, count = 1) => {
      if (count > 0) accountsDeleted.inc({ cause }, count);
    },
    emailSent: () => emailsSent.inc(),
    emailFailed: (outcome) => emailsFailed.inc({ outcome }),
    emailSuppressed: (reason) => emailsSuppressed.inc({ reason }),
    observeHttp: ({ method, route, status, durationSeconds }) => {
      const labels = { method, route, status_code: String(status) };
      httpRequests.inc(labels);
      httpDuration.observe(labels, durationSeconds);
    },
    trackOutbox(reader, onError) {
      backlogGauges(
        {
          counts: 'outbox_emails',
          countsHelp: 'Email outbox rows by status (pending, dead), read from the database at scrape time.',
          age: 'outbox_oldest_pending_age_seconds',
          ageHelp: 'Age of the oldest pending outbox row in seconds (0 when none is pending), read at scrape time.',
        },
        reader,
        onError,
      );
    },
    webhookAttempt: (outcome, durationSeconds) => {
      webhookAttempts.inc({ outcome });
      webhookAttemptDuration.observe(durationSeconds);
    },
    trackWebhooks(reader, onError) {
      backlogGauges(
        {
          counts: 'webhook_deliveries',
          countsHelp: 'Webhook deliveries by status: pending (to enabled endpoints), dead; read from the database at scrape time.',
          age: 'webhook_oldest_pending_age_seconds',
          ageHelp: 'Age of the oldest pending webhook delivery to an enabled endpoint in seconds (0 when none is pending), read at scrape time.',
        },
        reader,
        onError,
      );
    },
    trackAccessTokenCache(stats) {
      new Gauge({
        name: `${PREFIX}access_token_cache_entries`,
        help: 'Verified access tokens held in memory (ACCESS_TOKEN_CACHE_SIZE at most), read at scrape time.',
        registers,
        collect() {
          this.set(stats().entries);
        },
      });
      new Counter({
        name: `${PREFIX}access_token_verifications_total`,
        help: 'Access tokens presented on Bearer routes: found in the cache of verified tokens (cached) or verified in full (verified), read at scrape time.',
        labelNames: ['result'] as const,
        registers,
        collect() {
          const { hits, verifications } = stats();
          // Counts kept by the verifier (a plain integer per request); the counter shows them.
          this.reset();
          this.inc({ result: 'cached' }, hits);
          this.inc({ result: 'verified' }, verifications);
        },
      });
    },
  };
}
