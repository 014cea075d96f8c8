import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { codeHmacKeyFileProblem, rsaKeyFileProblem } from './modules/keys/keys.service.js';
import { DEFAULT_ACCESS_TOKEN_CACHE_SIZE } from './modules/tokens/access-token.service.js';
import { oauthSettings, publicUrlProblem, type OAuthSettings } from './modules/oauth/oauth.config.js';

/** SMTP transport security: none, required STARTTLS upgrade, or implicit TLS (README "Configuration"). */
export type SmtpTlsMode = 'none' | 'starttls' | 'tls';

export interface SmtpConfig {
  readonly host: string;
  readonly port: number;
  readonly tls: SmtpTlsMode;
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly from: string;
  readonly fromName: string | undefined;
  /**
   * PEM CA certificates read from `SMTP_CA_FILE` at start, trusted for the SMTP server's
   * certificate in addition to Node's bundled roots (a relay with a private CA or a
   * self-signed certificate); undefined: the bundled roots only.
   */
  readonly ca: string | undefined;
}

/** argon2id cost parameters (memory in KiB). OWASP Password Storage Cheat Sheet minimum: m=19456, t=2, p=1. */
export interface Argon2Params {
  readonly memoryCost: number;
  readonly timeCost: number;
  readonly parallelism: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** The validated, frozen service configuration. Built once at start by {@link loadConfig}. */
export interface Config {
  readonly host: string;
  readonly port: number;
  /** METRICS_PORT: serve GET /metrics only on this port (on `host`); undefined: on `port` with the API. */
  readonly metricsPort: number | undefined;
  /**
   * The admin API's listener (docs/admin-api.md): ADMIN_HOST (default `127.0.0.1`, never `HOST`'s
   * value by default: the admin API is for a private network) and ADMIN_PORT; `port` undefined:
   * no admin API at all.
   */
  readonly admin: AdminListenerSettings;
  /** `postgres://` URL; undefined selects the embedded PGlite database in `dataDir`. */
  readonly databaseUrl: string | undefined;
  readonly databasePoolMax: number;
  /**
   * DATABASE_POOL_MODE: `session` (default: a direct connection, or a pooler in session mode) or
   * `transaction` (behind PgBouncer in transaction mode: no start-up parameters, no named
   * prepared statements; docs/operations.md, "Behind a connection pooler").
   */
  readonly databasePoolMode: DatabasePoolMode;
  readonly dataDir: string;
  readonly migrateOnStart: boolean;
  readonly jwt: {
    /** PEM RSA private key path; undefined: a key is generated once into `dataDir`. */
    readonly privateKeyFile: string | undefined;
    /** PEM public keys of retired signing keys, still published in the JWKS. */
    readonly publicKeyFiles: readonly string[];
    readonly issuer: string;
    readonly audience: string;
    readonly accessTokenTtlSeconds: number;
    /** ACCESS_TOKEN_CACHE_SIZE: most verified access tokens kept in memory; 0: none (docs/performance.md). */
    readonly accessTokenCacheSize: number;
  };
  /**
   * CODE_HMAC_KEY_FILE: a file of at least 32 random bytes, the HKDF source of the key under which
   * one-time codes are stored (docs/decisions.md, "One-time codes"); undefined: derived from the
   * signing key, so switching the signing key invalidates outstanding codes.
   */
  readonly codeHmacKeyFile: string | undefined;
  /**
   * MFA_KEY_FILE: a file of at least 32 random bytes, the HKDF source of the keys that encrypt
   * TOTP secrets and hash recovery codes; unset: a key generated once into DATA_DIR. Every
   * instance that shares a database must read the same one (docs/operations.md).
   */
  readonly mfaKeyFile: string | undefined;
  /**
   * WEBHOOK_KEY_FILE: a file of at least 32 random bytes, the HKDF source of the key that
   * encrypts webhook signing secrets; unset: a key generated once into DATA_DIR. Every instance
   * that shares a database must read the same one (docs/operations.md).
   */
  readonly webhookKeyFile: string | undefined;
  /** Webhook delivery (docs/api.md#events-and-webhooks). */
  readonly webhooks: WebhookSettings;
  /** TOTP_ISSUER: the issuer authenticator apps show next to the account (default `Latchkey`). */
  readonly totpIssuer: string;
  /** Passkeys (docs/api.md#passkeys): the WebAuthn relying party, from configuration only. */
  readonly webauthn: WebauthnSettings;
  readonly sessionTtlSeconds: number;
  readonly verificationCodeTtlSeconds: number;
  /**
   * UNVERIFIED_ACCOUNT_TTL_SECONDS: a user whose email was never verified is deleted this long
   * after sign-up by the retention worker (docs/api.md#unverified-accounts-expire).
   */
  readonly unverifiedAccountTtlSeconds: number;
  /** ONE_TIME_CODE_TTL_SECONDS: lifetime of password-reset codes (docs/api.md#one-time-codes). */
  readonly oneTimeCodeTtlSeconds: number;
  /** PASSWORD_RESET_URL: the app page that completes a reset; reset emails link to it. Undefined: the code only. */
  readonly passwordResetUrl: string | undefined;
  readonly refreshReuseGraceSeconds: number;
  /** undefined: emails are written to the log (development mode). */
  readonly smtp: SmtpConfig | undefined;
  readonly trustProxy: boolean;
  readonly corsOrigins: readonly string[];
  readonly logLevel: LogLevel;
  /** Serve the demo page at GET /auth/v0/demo (DEMO_PAGE, default false). */
  readonly demoPage: boolean;
  readonly argon2: Argon2Params;
  /** Requests allowed per window; 0 disables a limit (see {@link RateLimitSettings}). */
  readonly rateLimits: RateLimitSettings;
  /** How long ended rows are kept (see {@link RetentionSettings}). */
  readonly retention: RetentionSettings;
  /** The breached-password check of new passwords (see {@link PasswordBreachSettings}). */
  readonly passwordBreach: PasswordBreachSettings;
  /**
   * PUBLIC_URL: the service's public origin, without a trailing `/` (default
   * `http://localhost:<PORT>`); identity providers return to `{publicUrl}/auth/v0/oauth/{id}/callback`.
   */
  readonly publicUrl: string;
  /** Sign-in with identity providers (docs/api.md#sign-in-with-an-identity-provider). */
  readonly oauth: OAuthSettings;
  /**
   * REAUTH_MAX_AGE_SECONDS: how recent a session's sign-in must be for the operations that ask
   * for one instead of a password (docs/api.md#recent-sign-in).
   */
  readonly reauthMaxAgeSeconds: number;
}

/** ADMIN_HOST and ADMIN_PORT (see {@link Config.admin}). */
export interface AdminListenerSettings {
  readonly host: string;
  /** Undefined: the admin API is off; 0: a port the system picks (tests). */
  readonly port: number | undefined;
}

/**
 * PASSWORD_BREACH_CHECK and PASSWORD_BREACH_API_URL (README "Configuration", docs/security.md
 * §5): with `hibp`, new passwords are also looked up with the k-anonymity range protocol of
 * Have I Been Pwned's Pwned Passwords API (src/modules/users/breached-passwords.ts).
 */
export interface PasswordBreachSettings {
  readonly check: 'off' | 'hibp';
  /** The range endpoint: an absolute http(s) URL ending in `/`, to which the 5-character prefix is appended. */
  readonly apiUrl: string;
}

/**
 * Retention periods in days (docs/operations.md, "Retention"; data minimisation, OWASP ASVS 5.0
 * V14.2.7): how long a row is kept after it stopped being usable, before the retention worker
 * (src/modules/retention/) deletes it. 0 deletes it at the next run.
 */
export interface RetentionSettings {
  /** Sessions, with their refresh tokens and devices, after they expired or were revoked (whichever came first). */
  readonly sessionsDays: number;
  /** Verification codes after they expired, were consumed or were superseded (whichever came first). */
  readonly verificationCodesDays: number;
  /** Sent and cancelled outbox rows after they were queued. */
  readonly outboxDays: number;
  /** Dead outbox rows after they were queued (operators list and retry them until then); at least `outboxDays`. */
  readonly outboxDeadDays: number;
  /** Admin API audit entries after they were written (docs/admin-api.md#audit-log). */
  readonly adminAuditDays: number;
  /** Webhook events and their delivered deliveries after the event (RETENTION_WEBHOOK_DAYS). */
  readonly webhookDays: number;
  /** Dead webhook deliveries (and the events they keep) after they were created; at least `webhookDays`. */
  readonly webhookDeadDays: number;
}

/** Webhook delivery settings (docs/api.md#events-and-webhooks, docs/security.md "Webhooks"). */
export interface WebhookSettings {
  /**
   * WEBHOOK_ALLOW_PRIVATE_NETWORKS: deliver to loopback and private addresses (RFC 1918, fc00::/7)
   * too; never to link-local ones. For development and tests; every instance must have the same value.
   */
  readonly allowPrivateNetworks: boolean;
}

/**
 * Rate limits (docs/security.md, rate limits), per fixed window; windows are fixed in
 * rate-limits.rules.ts. A client is an IPv4 address or an IPv6 /64.
 */
export interface RateLimitSettings {
  /** Failed sign-ins per identifier (username, email or phone) from one client per 15 minutes. */
  readonly signInPerIdentifier: number;
  /** Failed sign-ins per client per 15 minutes. */
  readonly signInPerIp: number;
  /** Failed sign-ins per account per hour, whatever identifier or client (NIST SP 800-63B-4 §3.2.2: at most 100). */
  readonly signInPerAccount: number;
  /** Sign-ups per client per hour. */
  readonly signUpPerIp: number;
  /** Failed email verifications per client per 15 minutes (on top of 5 per code). */
  readonly verifyPerIp: number;
  /** Verification-code resends per client per hour (on top of one per address per 60 s). */
  readonly resendPerIp: number;
  /** Password-reset requests per client per hour (on top of one per address per 60 s). */
  readonly passwordResetPerIp: number;
  /** Failed password-reset confirmations per client per 15 minutes (on top of 5 tries per code). */
  readonly passwordResetConfirmPerIp: number;
  /** Email-change requests per user per hour, every request (each may send a code). */
  readonly changeEmailPerUser: number;
  /** Failed email-change confirmations per client per 15 minutes (on top of 5 tries per code). */
  readonly changeEmailConfirmPerIp: number;
  /** Wrong second-factor codes at sign-in per account per hour. */
  readonly mfaPerAccount: number;
  /** Wrong second-factor codes at sign-in per client per 15 minutes. */
  readonly mfaPerIp: number;
  /** Admin API requests per API key per minute, every request counted (docs/admin-api.md#rate-limit). */
  readonly adminPerKey: number;
}

/** OWASP Password Storage Cheat Sheet, argon2id first configuration; also the lowest accepted values. */
export const OWASP_ARGON2_MINIMUM: Argon2Params = Object.freeze({ memoryCost: 19456, timeCost: 2, parallelism: 1 });

/** Defaults and bounds of README "Configuration", in seconds unless named otherwise. */
const DEFAULT_PORT = 3000;
/** SMTP submission port with STARTTLS (RFC 6409) and implicit-TLS submission port (RFC 8314). */
const SMTP_SUBMISSION_PORT = 587;
const SMTP_IMPLICIT_TLS_PORT = 465;
const DEFAULT_POOL_MAX = 10;
const MAX_POOL = 1000;
const DEFAULT_ACCESS_TOKEN_TTL = 900;
const MIN_ACCESS_TOKEN_TTL = 30;
const ONE_DAY = 86400;
/** A million verified tokens take about 1.1 GiB (1.2 KB each): more than a process should hold. */
const MAX_ACCESS_TOKEN_CACHE_SIZE = 1_000_000;
const DEFAULT_SESSION_TTL = 30 * ONE_DAY;
const MIN_SESSION_TTL = 60;
const MAX_SESSION_TTL = 365 * ONE_DAY;
const DEFAULT_CODE_TTL = 900;
const MIN_CODE_TTL = 60;
/** Refresh grace window off by default: the strict rule (docs/api.md#reuse-detection). */
const DEFAULT_REFRESH_GRACE = 0;
/** Longest refresh grace window accepted: one JWKS cache lifetime is far beyond two racing tabs. */
const MAX_REFRESH_GRACE = 300;
/** argon2id upper bounds: 4 GiB of memory, 100 passes, 16 lanes (beyond them a sign-in takes seconds). */
const MAX_ARGON2_MEMORY_KIB = 4 * 1024 * 1024;
const MAX_ARGON2_TIME_COST = 100;
const MAX_ARGON2_PARALLELISM = 16;
const MAX_PORT = 65535;
/**
 * REAUTH_MAX_AGE_SECONDS (docs/api.md#recent-sign-in): 10 minutes by default, about the time a
 * person takes from signing in again to finishing the change that asked for it; at least a
 * minute (a provider's sign-in page takes that), at most a day.
 */
const DEFAULT_REAUTH_MAX_AGE = 600;
const MIN_REAUTH_MAX_AGE = 60;
/**
 * Rate-limit defaults (docs/security.md, rate limits): 10 failures per identifier from one client
 * and 50 per client in 15 minutes; 100 failures per account per hour, the most NIST SP 800-63B-4
 * §3.2.2 allows (also its upper bound here); 20 failed verifications per client in 15 minutes
 * (four codes' worth of tries); 20 sign-ups and 20 resends per client per hour (a family or an
 * office behind one address signs up and asks again now and then; a script needs far more).
 */
const DEFAULT_SIGN_IN_PER_IDENTIFIER = 10;
const DEFAULT_SIGN_IN_PER_IP = 50;
const NIST_MAX_FAILED_ATTEMPTS = 100;
const DEFAULT_SIGN_IN_PER_ACCOUNT = NIST_MAX_FAILED_ATTEMPTS;
const DEFAULT_SIGN_UP_PER_IP = 20;
const DEFAULT_VERIFY_PER_IP = 20;
const DEFAULT_RESEND_PER_IP = 20;
/** Password-reset requests and failed reset confirmations per client: as resends and failed verifications. */
const DEFAULT_PASSWORD_RESET_PER_IP = 20;
const DEFAULT_PASSWORD_RESET_CONFIRM_PER_IP = 20;
/**
 * Email-change requests per user per hour: each one can mail a code to an address of the
 * requester's choice, and a person moving their account needs a few (a typo, a lost email).
 * Failed confirmations per client: as failed verifications.
 */
const DEFAULT_CHANGE_EMAIL_PER_USER = 5;
const DEFAULT_CHANGE_EMAIL_CONFIRM_PER_IP = 20;
/**
 * Wrong second-factor codes at sign-in: per account, 10 an hour (with 5 tries per challenge and
 * three live codes in the one-step drift window, under 1 chance in 30,000 an hour for someone
 * who has the password; the owner is held off an hour at most); per client, as verification.
 */
const DEFAULT_MFA_PER_ACCOUNT = 10;
const DEFAULT_MFA_PER_IP = 20;
/**
 * Admin API requests per key per minute: 600, ten a second on average, far above what a
 * backend acting on behalf of its support staff needs, and a bound on what a leaked key can do
 * (list every user, delete accounts) before someone revokes it.
 */
const DEFAULT_ADMIN_PER_KEY = 600;
const MAX_RATE_LIMIT = 1_000_000;
/**
 * Retention defaults in days (docs/operations.md, "Retention"). Sessions: a month of history
 * (`revoked_reason`, devices) for audits and support questions after a session ended.
 * Verification codes and sent or cancelled emails: a week, to answer "my code did not arrive"
 * (the relay's own logs cover longer). Dead emails: a month, so operators still see them in
 * `outbox list` well after an SMTP incident.
 */
const DEFAULT_RETENTION_SESSIONS_DAYS = 30;
const DEFAULT_RETENTION_CODES_DAYS = 7;
const DEFAULT_RETENTION_OUTBOX_DAYS = 7;
const DEFAULT_RETENTION_OUTBOX_DEAD_DAYS = 30;
/** Admin API audit entries: a year, to answer "who did this to my account?" long after the fact. */
const DEFAULT_RETENTION_ADMIN_AUDIT_DAYS = 365;
/**
 * Webhook events and delivered deliveries: a week, as sent emails (a receiver that lost an
 * event asks within days; `webhooks deliveries` shows them until then). Dead deliveries: a
 * month, as dead emails, so an operator can still retry them after a receiver's long outage.
 */
const DEFAULT_RETENTION_WEBHOOK_DAYS = 7;
const DEFAULT_RETENTION_WEBHOOK_DEAD_DAYS = 30;
/** Longest retention accepted: ten years, beyond any legal hold of this data. */
const MAX_RETENTION_DAYS = 3650;
/**
 * Unverified accounts expire after a week by default (docs/api.md#unverified-accounts-expire): long
 * enough to come back to a forgotten verification email, short enough that a squatted username
 * or address is soon free again. At least a day, the longest code lifetime
 * (VERIFICATION_CODE_TTL_SECONDS is at most 86400), so the first code always expires before
 * its account; at most the longest retention.
 */
const DEFAULT_UNVERIFIED_ACCOUNT_TTL = 7 * 86_400;
const MIN_UNVERIFIED_ACCOUNT_TTL = 86_400;
const MAX_UNVERIFIED_ACCOUNT_TTL = MAX_RETENTION_DAYS * 86_400;
/**
 * Shortest retention of dead emails: one day, the longest code lifetime
 * (VERIFICATION_CODE_TTL_SECONDS is at most 86400), so a dead row is kept while its code can
 * still be sent by `outbox retry`.
 */
const MIN_RETENTION_OUTBOX_DEAD_DAYS = 1;
/** The public Pwned Passwords range endpoint. */
export const DEFAULT_PASSWORD_BREACH_API_URL = 'https://api.pwnedpasswords.com/range/';
/**
 * Settings that no longer exist, with what replaced them: refused rather than silently ignored,
 * so a deployment does not believe a limit holds that is gone.
 */
const RETIRED_SETTINGS: Readonly<Record<string, string>> = {
  RATE_LIMIT_VERIFY_PER_ADDRESS:
    'replaced by RATE_LIMIT_VERIFY_PER_IP (a count per address let anyone block the owner\'s verification; each code still allows 5 tries)',
};

/**
 * Default `iss` and `aud`: the service's name, so that tokens of a zero-configuration instance
 * say where they come from. A deployment sets its public URL (`JWT_ISSUER`) and the name its
 * resource servers expect (`JWT_AUDIENCE`), README "Configuration".
 */
export const DEFAULT_JWT_ISSUER = 'latchkey';
export const DEFAULT_JWT_AUDIENCE = 'latchkey';

/** Thrown by {@link loadConfig} with every bad setting listed, one per line. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/** Settings whose value may instead be read from the file named by `<NAME>_FILE` (Docker/Kubernetes secrets). */
const FILE_BACKED = ['DATABASE_URL', 'SMTP_USERNAME', 'SMTP_PASSWORD'] as const;

/** What the connections of DATABASE_URL are (see {@link Config.databasePoolMode}). */
export type DatabasePoolMode = 'session' | 'transaction';
const DATABASE_POOL_MODES: readonly DatabasePoolMode[] = ['session', 'transaction'];

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Reads and validates the configuration from environment variables (README "Configuration").
 *
 * @param env the environment, `process.env` in production; tests pass a plain object.
 * @returns a deeply frozen {@link Config}.
 * @throws {ConfigError} listing every bad setting at once, so an operator fixes them in one go.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  const problems: string[] = [];
  const values: Record<string, string | undefined> = { ...env };
  for (const name of FILE_BACKED) {
    const file = env[`${name}_FILE`];
    if (file === undefined || file === '') continue;
    try {
      values[name] = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      problems.push(`${name}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  const str = (name: string): string | undefined => {
    const v = values[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  /** Secrets are taken as given (a password may start or end with a space). */
  const secret = (name: string): string | undefined => {
    const v = values[name];
    return v === undefined || v === '' ? undefined : v;
  };
  for (const [name, replacement] of Object.entries(RETIRED_SETTINGS)) {
    if (env[name] !== undefined) problems.push(`${name}: no longer supported; ${replacement}`);
  }
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = str(name);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name}: expected an integer from ${min} to ${max}, got "${raw}"`);
      return fallback;
    }
    return Number(raw);
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = str(name);
    if (raw === undefined) return fallback;
    if (raw === 'true' || raw === '1') return true;
    if (raw === 'false' || raw === '0') return false;
    problems.push(`${name}: expected true or false, got "${raw}"`);
    return fallback;
  };
  const list = (name: string): string[] =>
    (str(name) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');

  const databaseUrl = str('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push('DATABASE_URL: expected a postgres:// or postgresql:// URL');
  }

  const smtpHost = str('SMTP_HOST');
  const smtpTlsRaw = str('SMTP_TLS') ?? 'starttls';
  let smtpTls: SmtpTlsMode = 'starttls';
  if (smtpTlsRaw === 'none' || smtpTlsRaw === 'starttls' || smtpTlsRaw === 'tls') smtpTls = smtpTlsRaw;
  else problems.push(`SMTP_TLS: expected none, starttls or tls, got "${smtpTlsRaw}"`);
  const smtpPort = int('SMTP_PORT', smtpTls === 'tls' ? SMTP_IMPLICIT_TLS_PORT : SMTP_SUBMISSION_PORT, 1, MAX_PORT);
  const smtpFrom = str('SMTP_FROM');
  const smtpCaFile = str('SMTP_CA_FILE');
  let smtpCa: string | undefined;
  if (smtpCaFile !== undefined) {
    const read = readPemCertificates(smtpCaFile);
    if (typeof read === 'string') smtpCa = read;
    else problems.push(`SMTP_CA_FILE: ${read.problem}`);
  }
  let smtp: SmtpConfig | undefined;
  if (smtpHost !== undefined) {
    if (smtpFrom === undefined) problems.push('SMTP_FROM: required when SMTP_HOST is set');
    else if (!/^[^\s@]+@[^\s@]+$/.test(smtpFrom)) problems.push(`SMTP_FROM: expected an email address, got "${smtpFrom}"`);
    smtp = {
      host: smtpHost,
      port: smtpPort,
      tls: smtpTls,
      username: secret('SMTP_USERNAME'),
      password: secret('SMTP_PASSWORD'),
      from: smtpFrom ?? '',
      fromName: str('SMTP_FROM_NAME'),
      ca: smtpCa,
    };
    if ((smtp.username === undefined) !== (smtp.password === undefined)) {
      problems.push('SMTP_USERNAME and SMTP_PASSWORD: set both or neither');
    }
  }

  const databasePoolMode = (str('DATABASE_POOL_MODE') ?? 'session') as DatabasePoolMode;
  if (!DATABASE_POOL_MODES.includes(databasePoolMode)) problems.push(`DATABASE_POOL_MODE: expected one of ${DATABASE_POOL_MODES.join(', ')}, got "${databasePoolMode}"`);
  const logLevel = (str('LOG_LEVEL') ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL: expected one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);

  const corsOrigins = list('CORS_ORIGINS');
  for (const origin of corsOrigins) {
    if (origin === '*' || !/^https?:\/\/[^/\s]+$/.test(origin)) {
      problems.push(`CORS_ORIGINS: "${origin}" is not an origin like https://app.example.com (no wildcard, no path)`);
    }
  }

  const privateKeyFile = str('JWT_PRIVATE_KEY_FILE');
  const publicKeyFiles = list('JWT_PUBLIC_KEY_FILES');
  if (privateKeyFile !== undefined) {
    const problem = rsaKeyFileProblem(privateKeyFile, 'private');
    if (problem !== undefined) problems.push(`JWT_PRIVATE_KEY_FILE: ${problem}`);
  }
  for (const file of publicKeyFiles) {
    const problem = rsaKeyFileProblem(file, 'public');
    if (problem !== undefined) problems.push(`JWT_PUBLIC_KEY_FILES: ${problem}`);
  }

  // docs/api.md#refresh-token-rotation: 0 is the strict reuse rule; above 0 the live token's parent may be
  // presented again within this many seconds of its rotation (two tabs refreshing at once).
  const refreshReuseGraceSeconds = int('REFRESH_REUSE_GRACE_SECONDS', DEFAULT_REFRESH_GRACE, 0, MAX_REFRESH_GRACE);

  // Retention (docs/operations.md): dead outbox rows stay at least as long as finished ones.
  const retentionOutboxDays = int('RETENTION_OUTBOX_DAYS', DEFAULT_RETENTION_OUTBOX_DAYS, 0, MAX_RETENTION_DAYS);
  const retentionOutboxDeadDays = int('RETENTION_OUTBOX_DEAD_DAYS', DEFAULT_RETENTION_OUTBOX_DEAD_DAYS, MIN_RETENTION_OUTBOX_DEAD_DAYS, MAX_RETENTION_DAYS);
  if (retentionOutboxDeadDays < retentionOutboxDays) {
    problems.push(`RETENTION_OUTBOX_DEAD_DAYS: must be at least RETENTION_OUTBOX_DAYS (${retentionOutboxDays}), got ${retentionOutboxDeadDays}`);
  }

  const retentionWebhookDays = int('RETENTION_WEBHOOK_DAYS', DEFAULT_RETENTION_WEBHOOK_DAYS, 0, MAX_RETENTION_DAYS);
  const retentionWebhookDeadDays = int('RETENTION_WEBHOOK_DEAD_DAYS', DEFAULT_RETENTION_WEBHOOK_DEAD_DAYS, 0, MAX_RETENTION_DAYS);
  if (retentionWebhookDeadDays < retentionWebhookDays) {
    problems.push(`RETENTION_WEBHOOK_DEAD_DAYS: must be at least RETENTION_WEBHOOK_DAYS (${retentionWebhookDays}), got ${retentionWebhookDeadDays}`);
  }

  // Prometheus metrics on a listener of their own, so the scrape endpoint can stay private.
  const metricsPort = str('METRICS_PORT') === undefined ? undefined : int('METRICS_PORT', DEFAULT_PORT, 1, MAX_PORT);
  if (metricsPort !== undefined && String(metricsPort) === (str('PORT') ?? String(DEFAULT_PORT))) {
    problems.push(`METRICS_PORT: must differ from PORT (${metricsPort})`);
  }

  // The admin API on a listener of its own (docs/admin-api.md), off unless ADMIN_PORT is set. A
  // port shared with the public or metrics listener would put the admin API where it must not be.
  const adminPort = str('ADMIN_PORT') === undefined ? undefined : int('ADMIN_PORT', 0, 0, MAX_PORT);
  if (adminPort !== undefined && adminPort !== 0) {
    if (String(adminPort) === (str('PORT') ?? String(DEFAULT_PORT))) problems.push(`ADMIN_PORT: must differ from PORT (${adminPort}): the admin API never shares the public listener`);
    if (metricsPort !== undefined && adminPort === metricsPort) problems.push(`ADMIN_PORT: must differ from METRICS_PORT (${adminPort})`);
  }

  // Breached-password check: off unless asked for (it sends a hash prefix to a third party).
  const breachCheckRaw = str('PASSWORD_BREACH_CHECK') ?? 'off';
  let breachCheck: PasswordBreachSettings['check'] = 'off';
  if (breachCheckRaw === 'off' || breachCheckRaw === 'hibp') breachCheck = breachCheckRaw;
  else problems.push(`PASSWORD_BREACH_CHECK: expected off or hibp, got "${breachCheckRaw}"`);
  const breachApiUrl = str('PASSWORD_BREACH_API_URL') ?? DEFAULT_PASSWORD_BREACH_API_URL;
  const breachApiUrlProblem = rangeUrlProblem(breachApiUrl);
  if (breachApiUrlProblem !== undefined) problems.push(`PASSWORD_BREACH_API_URL: ${breachApiUrlProblem}, got "${breachApiUrl}"`);

  const mfaKeyFile = str('MFA_KEY_FILE');
  if (mfaKeyFile !== undefined) {
    const problem = codeHmacKeyFileProblem(mfaKeyFile);
    if (problem !== undefined) problems.push(`MFA_KEY_FILE: ${problem}`);
  }
  const webhookKeyFile = str('WEBHOOK_KEY_FILE');
  if (webhookKeyFile !== undefined) {
    const problem = codeHmacKeyFileProblem(webhookKeyFile);
    if (problem !== undefined) problems.push(`WEBHOOK_KEY_FILE: ${problem}`);
  }
  const totpIssuer = str('TOTP_ISSUER') ?? 'Latchkey';
  if (totpIssuer.length > 64 || totpIssuer.includes(':')) problems.push('TOTP_ISSUER: at most 64 characters, without ":"');
  const port = int('PORT', DEFAULT_PORT, 0, MAX_PORT);
  const webauthn = webauthnSettings(str('WEBAUTHN_RP_ID'), str('WEBAUTHN_RP_NAME'), str('WEBAUTHN_ORIGINS') ?? defaultWebauthnOrigin(port), problems);
  const codeHmacKeyFile = str('CODE_HMAC_KEY_FILE');
  if (codeHmacKeyFile !== undefined) {
    const problem = codeHmacKeyFileProblem(codeHmacKeyFile);
    if (problem !== undefined) problems.push(`CODE_HMAC_KEY_FILE: ${problem}`);
  }

  // The reset link is built from this setting only, never from request headers (docs/api.md#request-a-password-reset).
  const passwordResetUrl = str('PASSWORD_RESET_URL');
  if (passwordResetUrl !== undefined && !isAbsoluteHttpUrl(passwordResetUrl)) {
    problems.push(`PASSWORD_RESET_URL: expected an absolute http:// or https:// URL without a fragment, got "${passwordResetUrl}"`);
  }

  const publicUrl = (str('PUBLIC_URL') ?? `http://localhost:${port}`).replace(/\/+$/, '');
  const publicUrlIssue = publicUrlProblem(publicUrl);
  if (publicUrlIssue !== undefined) problems.push(`PUBLIC_URL: ${publicUrlIssue}, got "${str('PUBLIC_URL') ?? ''}"`);
  const oauth = oauthSettings({ str, secret, bool, list }, problems);

  const config: Config = {
    host: str('HOST') ?? '127.0.0.1',
    port,
    metricsPort,
    admin: { host: str('ADMIN_HOST') ?? '127.0.0.1', port: adminPort },
    databaseUrl,
    databasePoolMax: int('DATABASE_POOL_MAX', DEFAULT_POOL_MAX, 1, MAX_POOL),
    databasePoolMode,
    dataDir: path.resolve(str('DATA_DIR') ?? './data'),
    migrateOnStart: bool('MIGRATE_ON_START', true),
    jwt: {
      privateKeyFile,
      publicKeyFiles,
      issuer: str('JWT_ISSUER') ?? DEFAULT_JWT_ISSUER,
      audience: str('JWT_AUDIENCE') ?? DEFAULT_JWT_AUDIENCE,
      accessTokenTtlSeconds: int('ACCESS_TOKEN_TTL_SECONDS', DEFAULT_ACCESS_TOKEN_TTL, MIN_ACCESS_TOKEN_TTL, ONE_DAY),
      accessTokenCacheSize: int('ACCESS_TOKEN_CACHE_SIZE', DEFAULT_ACCESS_TOKEN_CACHE_SIZE, 0, MAX_ACCESS_TOKEN_CACHE_SIZE),
    },
    codeHmacKeyFile,
    mfaKeyFile,
    webhookKeyFile,
    webhooks: { allowPrivateNetworks: bool('WEBHOOK_ALLOW_PRIVATE_NETWORKS', false) },
    totpIssuer,
    webauthn,
    sessionTtlSeconds: int('SESSION_TTL_SECONDS', DEFAULT_SESSION_TTL, MIN_SESSION_TTL, MAX_SESSION_TTL),
    verificationCodeTtlSeconds: int('VERIFICATION_CODE_TTL_SECONDS', DEFAULT_CODE_TTL, MIN_CODE_TTL, ONE_DAY),
    unverifiedAccountTtlSeconds: int('UNVERIFIED_ACCOUNT_TTL_SECONDS', DEFAULT_UNVERIFIED_ACCOUNT_TTL, MIN_UNVERIFIED_ACCOUNT_TTL, MAX_UNVERIFIED_ACCOUNT_TTL),
    oneTimeCodeTtlSeconds: int('ONE_TIME_CODE_TTL_SECONDS', DEFAULT_CODE_TTL, MIN_CODE_TTL, ONE_DAY),
    passwordResetUrl,
    refreshReuseGraceSeconds,
    smtp,
    trustProxy: bool('TRUST_PROXY', false),
    corsOrigins,
    logLevel,
    demoPage: bool('DEMO_PAGE', false),
    argon2: {
      memoryCost: int('ARGON2_MEMORY_KIB', OWASP_ARGON2_MINIMUM.memoryCost, OWASP_ARGON2_MINIMUM.memoryCost, MAX_ARGON2_MEMORY_KIB),
      timeCost: int('ARGON2_TIME_COST', OWASP_ARGON2_MINIMUM.timeCost, OWASP_ARGON2_MINIMUM.timeCost, MAX_ARGON2_TIME_COST),
      parallelism: int('ARGON2_PARALLELISM', OWASP_ARGON2_MINIMUM.parallelism, 1, MAX_ARGON2_PARALLELISM),
    },
    rateLimits: {
      signInPerIdentifier: int('RATE_LIMIT_SIGN_IN_PER_IDENTIFIER', DEFAULT_SIGN_IN_PER_IDENTIFIER, 0, MAX_RATE_LIMIT),
      signInPerIp: int('RATE_LIMIT_SIGN_IN_PER_IP', DEFAULT_SIGN_IN_PER_IP, 0, MAX_RATE_LIMIT),
      signUpPerIp: int('RATE_LIMIT_SIGN_UP_PER_IP', DEFAULT_SIGN_UP_PER_IP, 0, MAX_RATE_LIMIT),
      signInPerAccount: int('RATE_LIMIT_SIGN_IN_PER_ACCOUNT', DEFAULT_SIGN_IN_PER_ACCOUNT, 0, NIST_MAX_FAILED_ATTEMPTS),
      verifyPerIp: int('RATE_LIMIT_VERIFY_PER_IP', DEFAULT_VERIFY_PER_IP, 0, MAX_RATE_LIMIT),
      resendPerIp: int('RATE_LIMIT_RESEND_PER_IP', DEFAULT_RESEND_PER_IP, 0, MAX_RATE_LIMIT),
      passwordResetPerIp: int('RATE_LIMIT_PASSWORD_RESET_PER_IP', DEFAULT_PASSWORD_RESET_PER_IP, 0, MAX_RATE_LIMIT),
      passwordResetConfirmPerIp: int('RATE_LIMIT_PASSWORD_RESET_CONFIRM_PER_IP', DEFAULT_PASSWORD_RESET_CONFIRM_PER_IP, 0, MAX_RATE_LIMIT),
      changeEmailPerUser: int('RATE_LIMIT_CHANGE_EMAIL_PER_USER', DEFAULT_CHANGE_EMAIL_PER_USER, 0, MAX_RATE_LIMIT),
      changeEmailConfirmPerIp: int('RATE_LIMIT_CHANGE_EMAIL_CONFIRM_PER_IP', DEFAULT_CHANGE_EMAIL_CONFIRM_PER_IP, 0, MAX_RATE_LIMIT),
      mfaPerAccount: int('RATE_LIMIT_MFA_PER_ACCOUNT', DEFAULT_MFA_PER_ACCOUNT, 0, MAX_RATE_LIMIT),
      mfaPerIp: int('RATE_LIMIT_MFA_PER_IP', DEFAULT_MFA_PER_IP, 0, MAX_RATE_LIMIT),
      adminPerKey: int('RATE_LIMIT_ADMIN_PER_KEY', DEFAULT_ADMIN_PER_KEY, 0, MAX_RATE_LIMIT),
    },
    retention: {
      sessionsDays: int('RETENTION_SESSIONS_DAYS', DEFAULT_RETENTION_SESSIONS_DAYS, 0, MAX_RETENTION_DAYS),
      verificationCodesDays: int('RETENTION_VERIFICATION_CODES_DAYS', DEFAULT_RETENTION_CODES_DAYS, 0, MAX_RETENTION_DAYS),
      outboxDays: retentionOutboxDays,
      outboxDeadDays: retentionOutboxDeadDays,
      adminAuditDays: int('RETENTION_ADMIN_AUDIT_DAYS', DEFAULT_RETENTION_ADMIN_AUDIT_DAYS, 0, MAX_RETENTION_DAYS),
      webhookDays: retentionWebhookDays,
      webhookDeadDays: retentionWebhookDeadDays,
    },
    passwordBreach: { check: breachCheck, apiUrl: breachApiUrl },
    publicUrl,
    oauth,
    reauthMaxAgeSeconds: int('REAUTH_MAX_AGE_SECONDS', DEFAULT_REAUTH_MAX_AGE, MIN_REAUTH_MAX_AGE, ONE_DAY),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

/**
 * Why `raw` cannot serve as a range endpoint (the 5-character hash prefix is appended to it), or
 * undefined: it must be an absolute http or https URL (RFC 3986 §4.3) ending in `/`, without a
 * query or fragment.
 */
function rangeUrlProblem(raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'expected an absolute http:// or https:// URL ending in /';
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !/^https?:\/\/[^/]/i.test(raw)) return 'expected an absolute http:// or https:// URL ending in /';
  if (url.search !== '' || url.hash !== '' || raw.includes('?') || raw.includes('#')) return 'expected a URL without a query or fragment';
  if (!raw.endsWith('/')) return 'expected a URL ending in / (the hash prefix is appended to it)';
  return undefined;
}

/** Whether `raw` is an absolute http or https URL (RFC 3986 §4.3) with a host and no fragment (the reset link appends its own). */
function isAbsoluteHttpUrl(raw: string): boolean {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return false;
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && /^https?:\/\/[^/\s]/i.test(raw) && !raw.includes('#');
}

/** One PEM certificate block (RFC 7468 §5). */
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * Reads a file of PEM certificates (a CA bundle) and checks that each one parses as X.509.
 * @returns the file's text, or `{problem}` saying why it cannot serve as a CA file.
 */
function readPemCertificates(file: string): string | { problem: string } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    return { problem: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) return { problem: `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)` };
  for (const [i, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch {
      return { problem: `certificate ${i + 1} in ${file} is not a valid X.509 certificate` };
    }
  }
  return text;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** The WebAuthn relying party (docs/api.md#passkeys, docs/integration.md#passkeys). */
export interface WebauthnSettings {
  /** WEBAUTHN_RP_ID: the relying party id, a domain (default `localhost`). */
  readonly rpId: string;
  /** WEBAUTHN_RP_NAME: the name authenticators show (default `Latchkey`). */
  readonly rpName: string;
  /** WEBAUTHN_ORIGINS: the exact origins a ceremony may come from (default `http://localhost:<PORT>`, {@link defaultWebauthnOrigin}). */
  readonly origins: readonly string[];
}

/**
 * The origin WEBAUTHN_ORIGINS defaults to: `http://localhost:<port>`, the page the service itself
 * serves on PORT (the demo page), so passkeys work there on any port without configuration.
 * Written as an origin is serialised (RFC 6454 §6.1: port 80 is not named).
 */
export function defaultWebauthnOrigin(port: number): string {
  return new URL(`http://localhost:${port}`).origin;
}

/** A domain as an RP ID must be: lowercase labels of letters, digits and hyphens (W3C WebAuthn Level 3 §5.1.4.1). */
const RP_ID = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;
/** Longest WEBAUTHN_RP_NAME, in characters. */
const MAX_RP_NAME_LENGTH = 64;

/**
 * WEBAUTHN_RP_ID, WEBAUTHN_RP_NAME and WEBAUTHN_ORIGINS, checked: the RP ID a domain; each origin
 * `https://host[:port]`, or `http://` for localhost only (browsers offer WebAuthn in secure
 * contexts only), whose host is the RP ID or a subdomain of it (W3C WebAuthn Level 3 §5.1.3
 * step 8, §5.1.4.1 step 7). Problems are pushed onto `problems`.
 */
function webauthnSettings(rpIdRaw: string | undefined, rpNameRaw: string | undefined, originsRaw: string, problems: string[]): WebauthnSettings {
  const rpId = rpIdRaw ?? 'localhost';
  const rpName = rpNameRaw ?? 'Latchkey';
  const origins = originsRaw.split(',').map((o) => o.trim()).filter((o) => o !== '');
  if (!RP_ID.test(rpId)) problems.push(`WEBAUTHN_RP_ID: expected a domain such as example.com (no scheme, port or path), got "${rpId}"`);
  if (rpName.length > MAX_RP_NAME_LENGTH) problems.push(`WEBAUTHN_RP_NAME: at most ${MAX_RP_NAME_LENGTH} characters`);
  if (origins.length === 0) problems.push('WEBAUTHN_ORIGINS: at least one origin');
  for (const origin of origins) {
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    const exact = url !== undefined && url.origin === origin;
    const secure = url !== undefined && (url.protocol === 'https:' || (url.protocol === 'http:' && url.hostname === 'localhost'));
    const underRpId = url !== undefined && (url.hostname === rpId || url.hostname.endsWith(`.${rpId}`));
    if (!exact || !secure) problems.push(`WEBAUTHN_ORIGINS: expected origins such as https://app.example.com (http:// only for localhost; no path or trailing slash), got "${origin}"`);
    else if (!underRpId) problems.push(`WEBAUTHN_ORIGINS: "${origin}" is not on WEBAUTHN_RP_ID "${rpId}" or a subdomain of it`);
  }
  return { rpId, rpName, origins };
}
