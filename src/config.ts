import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { keyFileProblems } from './modules/keys/keys.config.js';
import { oauthSettings, publicUrlProblem, type OAuthSettings } from './modules/oauth/oauth.config.js';
import { OWASP_ARGON2_MINIMUM as ARGON2_MINIMUM, RETIRED_SETTINGS, SETTINGS, type Setting, type SettingName, type SettingValues } from './settings.js';

export { DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER, DEFAULT_PASSWORD_BREACH_API_URL } from './settings.js';

/** SMTP transport security: none, required STARTTLS upgrade, or implicit TLS (README "Configuration"). */
export type SmtpTlsMode = SettingValues['SMTP_TLS'];

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

export type LogLevel = SettingValues['LOG_LEVEL'];

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
  readonly check: SettingValues['PASSWORD_BREACH_CHECK'];
  /** The range endpoint: an absolute http(s) URL ending in `/`, to which the 5-character prefix is appended. */
  readonly apiUrl: string;
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
 * Retention periods in days (docs/operations.md, "Retention"; data minimisation, OWASP ASVS 5.0
 * V14.2.7): how long a row is kept after it stopped being usable, before the retention worker
 * (src/modules/retention/) deletes it. 0 deletes it at the next run. Each member is the setting
 * it names here (bounds and defaults in src/settings.ts).
 */
const RETENTION_SETTINGS = {
  /** Sessions, with their refresh tokens and devices, after they expired or were revoked (whichever came first). */
  sessionsDays: 'RETENTION_SESSIONS_DAYS',
  /** Verification codes after they expired, were consumed or were superseded (whichever came first). */
  verificationCodesDays: 'RETENTION_VERIFICATION_CODES_DAYS',
  /** Sent and cancelled outbox rows after they were queued. */
  outboxDays: 'RETENTION_OUTBOX_DAYS',
  /** Dead outbox rows after they were queued (operators list and retry them until then); at least `outboxDays`. */
  outboxDeadDays: 'RETENTION_OUTBOX_DEAD_DAYS',
  /** Admin API audit entries after they were written (docs/admin-api.md#audit-log). */
  adminAuditDays: 'RETENTION_ADMIN_AUDIT_DAYS',
  /** Webhook events and their delivered deliveries after the event. */
  webhookDays: 'RETENTION_WEBHOOK_DAYS',
  /** Dead webhook deliveries (and the events they keep) after they were created; at least `webhookDays`. */
  webhookDeadDays: 'RETENTION_WEBHOOK_DEAD_DAYS',
} as const satisfies Record<string, SettingName>;

/** Retention periods in days, by {@link RETENTION_SETTINGS}. */
export type RetentionSettings = { readonly [K in keyof typeof RETENTION_SETTINGS]: SettingValues[(typeof RETENTION_SETTINGS)[K]] };

/**
 * Rate limits (docs/security.md, rate limits), per fixed window; windows are fixed in
 * rate-limits.rules.ts. A client is an IPv4 address or an IPv6 /64. Requests allowed per window;
 * 0 disables a limit. Each member is the setting it names here (src/settings.ts).
 */
const RATE_LIMIT_SETTINGS = {
  /** Failed sign-ins per identifier (username, email or phone) from one client per 15 minutes. */
  signInPerIdentifier: 'RATE_LIMIT_SIGN_IN_PER_IDENTIFIER',
  /** Failed sign-ins per client per 15 minutes. */
  signInPerIp: 'RATE_LIMIT_SIGN_IN_PER_IP',
  /** Failed sign-ins per account per hour, whatever identifier or client (NIST SP 800-63B-4 §3.2.2: at most 100). */
  signInPerAccount: 'RATE_LIMIT_SIGN_IN_PER_ACCOUNT',
  /** Sign-ups per client per hour. */
  signUpPerIp: 'RATE_LIMIT_SIGN_UP_PER_IP',
  /** Failed email verifications per client per 15 minutes (on top of 5 per code). */
  verifyPerIp: 'RATE_LIMIT_VERIFY_PER_IP',
  /** Verification-code resends per client per hour (on top of one per address per 60 s). */
  resendPerIp: 'RATE_LIMIT_RESEND_PER_IP',
  /** Password-reset requests per client per hour (on top of one per address per 60 s). */
  passwordResetPerIp: 'RATE_LIMIT_PASSWORD_RESET_PER_IP',
  /** Failed password-reset confirmations per client per 15 minutes (on top of 5 tries per code). */
  passwordResetConfirmPerIp: 'RATE_LIMIT_PASSWORD_RESET_CONFIRM_PER_IP',
  /** Email-change requests per user per hour, every request (each may send a code). */
  changeEmailPerUser: 'RATE_LIMIT_CHANGE_EMAIL_PER_USER',
  /** Failed email-change confirmations per client per 15 minutes (on top of 5 tries per code). */
  changeEmailConfirmPerIp: 'RATE_LIMIT_CHANGE_EMAIL_CONFIRM_PER_IP',
  /** Wrong second-factor codes at sign-in per account per hour. */
  mfaPerAccount: 'RATE_LIMIT_MFA_PER_ACCOUNT',
  /** Wrong second-factor codes at sign-in per client per 15 minutes. */
  mfaPerIp: 'RATE_LIMIT_MFA_PER_IP',
  /** Admin API requests per API key per minute, every request counted (docs/admin-api.md#rate-limit). */
  adminPerKey: 'RATE_LIMIT_ADMIN_PER_KEY',
} as const satisfies Record<string, SettingName>;

/** Rate limits, by {@link RATE_LIMIT_SETTINGS}. */
export type RateLimitSettings = { readonly [K in keyof typeof RATE_LIMIT_SETTINGS]: SettingValues[(typeof RATE_LIMIT_SETTINGS)[K]] };

/** OWASP Password Storage Cheat Sheet, argon2id first configuration; also the lowest accepted values. */
export const OWASP_ARGON2_MINIMUM: Argon2Params = ARGON2_MINIMUM;

/** SMTP submission port with STARTTLS (RFC 6409) and implicit-TLS submission port (RFC 8314): SMTP_PORT's default by SMTP_TLS. */
const SMTP_SUBMISSION_PORT = 587;
const SMTP_IMPLICIT_TLS_PORT = 465;

/** Thrown by {@link loadConfig} with every bad setting listed, one per line. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/** What the connections of DATABASE_URL are (see {@link Config.databasePoolMode}). */
export type DatabasePoolMode = SettingValues['DATABASE_POOL_MODE'];

/** How a setting's raw text is read: trimmed, or as given (secrets); empty is unset either way. */
interface RawReader {
  str(name: string): string | undefined;
  secret(name: string): string | undefined;
}

/** `a`, `b` or `c`. */
function orWords(values: readonly string[]): string {
  return values.length === 1 ? values[0]! : `${values.slice(0, -1).join(', ')} or ${values.at(-1)!}`;
}

/**
 * Reads setting `name` by its declaration (src/settings.ts): a bad value pushes
 * `NAME: what was expected, got "value"` onto `problems` and reads as the default.
 */
function readSetting(name: string, setting: Exclude<Setting, { kind: 'module' }>, read: RawReader, problems: string[]): unknown {
  if (setting.kind === 'text' && setting.secret === true) return read.secret(name) ?? setting.default;
  const raw = read.str(name);
  switch (setting.kind) {
    case 'int':
      if (raw === undefined) return setting.default;
      if (!/^\d+$/.test(raw) || Number(raw) < setting.min || Number(raw) > setting.max) {
        problems.push(`${name}: expected an integer from ${setting.min} to ${setting.max}, got "${raw}"`);
        return setting.default;
      }
      return Number(raw);
    case 'bool':
      if (raw === undefined) return setting.default;
      if (raw === 'true' || raw === '1') return true;
      if (raw === 'false' || raw === '0') return false;
      problems.push(`${name}: expected true or false, got "${raw}"`);
      return setting.default;
    case 'enum':
      if (raw === undefined) return setting.default;
      if (setting.values.includes(raw)) return raw;
      problems.push(`${name}: expected ${orWords(setting.values)}, got "${raw}"`);
      return setting.default;
    case 'text': {
      if (raw === undefined) return setting.default;
      const problem = setting.check?.(raw);
      if (problem !== undefined) problems.push(`${name}: ${problem}`);
      return raw;
    }
    case 'path':
      return raw ?? setting.default;
    case 'list': {
      const items = (raw ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
      for (const item of items) {
        const problem = setting.check?.(item);
        if (problem !== undefined) problems.push(`${name}: ${problem}`);
      }
      return items;
    }
  }
}

/**
 * Reads and validates the configuration from environment variables (README "Configuration";
 * each setting is declared once in src/settings.ts): first every setting by its declaration,
 * then the rules between settings, the identity providers (src/modules/oauth/oauth.config.ts)
 * and the key files (src/modules/keys/keys.config.ts). A setting that no longer exists
 * ({@link RETIRED_SETTINGS}) is refused.
 *
 * @param env the environment, `process.env` in production; tests pass a plain object.
 * @returns a deeply frozen {@link Config}.
 * @throws {ConfigError} listing every bad setting at once, so an operator fixes them in one go.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  const problems: string[] = [];
  const declared = Object.entries(SETTINGS as Record<string, Setting>);
  const values: Record<string, string | undefined> = { ...env };
  // `<NAME>_FILE` names a file holding the value (Docker and Kubernetes secrets).
  for (const [name, setting] of declared) {
    if (setting.kind !== 'text' || setting.fromFile !== true) continue;
    const file = env[`${name}_FILE`];
    if (file === undefined || file === '') continue;
    try {
      values[name] = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      problems.push(`${name}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  const read: RawReader = {
    str: (name) => {
      const v = values[name];
      return v === undefined || v.trim() === '' ? undefined : v.trim();
    },
    /** Secrets are taken as given (a password may start or end with a space). */
    secret: (name) => {
      const v = values[name];
      return v === undefined || v === '' ? undefined : v;
    },
  };
  for (const [name, replacement] of Object.entries(RETIRED_SETTINGS)) {
    if (env[name] !== undefined) problems.push(`${name}: no longer supported; ${replacement}`);
  }
  const parsed: Record<string, unknown> = {};
  for (const [name, setting] of declared) if (setting.kind !== 'module') parsed[name] = readSetting(name, setting, read, problems);
  const v = parsed as SettingValues;

  // SMTP (README "Configuration"): off unless SMTP_HOST is set; then SMTP_FROM is required.
  let smtpCa: string | undefined;
  if (v.SMTP_CA_FILE !== undefined) {
    const pem = readPemCertificates(v.SMTP_CA_FILE);
    if (typeof pem === 'string') smtpCa = pem;
    else problems.push(`SMTP_CA_FILE: ${pem.problem}`);
  }
  let smtp: SmtpConfig | undefined;
  if (v.SMTP_HOST !== undefined) {
    if (v.SMTP_FROM === undefined) problems.push('SMTP_FROM: required when SMTP_HOST is set');
    else if (!/^[^\s@]+@[^\s@]+$/.test(v.SMTP_FROM)) problems.push(`SMTP_FROM: expected an email address, got "${v.SMTP_FROM}"`);
    if ((v.SMTP_USERNAME === undefined) !== (v.SMTP_PASSWORD === undefined)) problems.push('SMTP_USERNAME and SMTP_PASSWORD: set both or neither');
    smtp = {
      host: v.SMTP_HOST,
      port: v.SMTP_PORT ?? (v.SMTP_TLS === 'tls' ? SMTP_IMPLICIT_TLS_PORT : SMTP_SUBMISSION_PORT),
      tls: v.SMTP_TLS,
      username: v.SMTP_USERNAME,
      password: v.SMTP_PASSWORD,
      from: v.SMTP_FROM ?? '',
      fromName: v.SMTP_FROM_NAME,
      ca: smtpCa,
    };
  }

  // Retention (docs/operations.md): dead rows stay at least as long as finished ones.
  if (v.RETENTION_OUTBOX_DEAD_DAYS < v.RETENTION_OUTBOX_DAYS) {
    problems.push(`RETENTION_OUTBOX_DEAD_DAYS: must be at least RETENTION_OUTBOX_DAYS (${v.RETENTION_OUTBOX_DAYS}), got ${v.RETENTION_OUTBOX_DEAD_DAYS}`);
  }
  if (v.RETENTION_WEBHOOK_DEAD_DAYS < v.RETENTION_WEBHOOK_DAYS) {
    problems.push(`RETENTION_WEBHOOK_DEAD_DAYS: must be at least RETENTION_WEBHOOK_DAYS (${v.RETENTION_WEBHOOK_DAYS}), got ${v.RETENTION_WEBHOOK_DEAD_DAYS}`);
  }

  // Prometheus metrics and the admin API (docs/admin-api.md) on listeners of their own: a port
  // shared with the public listener would put them where they must not be. PORT as written.
  const portAsWritten = read.str('PORT') ?? String(SETTINGS.PORT.default);
  if (v.METRICS_PORT !== undefined && String(v.METRICS_PORT) === portAsWritten) problems.push(`METRICS_PORT: must differ from PORT (${v.METRICS_PORT})`);
  if (v.ADMIN_PORT !== undefined && v.ADMIN_PORT !== 0) {
    if (String(v.ADMIN_PORT) === portAsWritten) problems.push(`ADMIN_PORT: must differ from PORT (${v.ADMIN_PORT}): the admin API never shares the public listener`);
    if (v.METRICS_PORT !== undefined && v.ADMIN_PORT === v.METRICS_PORT) problems.push(`ADMIN_PORT: must differ from METRICS_PORT (${v.ADMIN_PORT})`);
  }

  const webauthn = webauthnSettings(v.WEBAUTHN_RP_ID, v.WEBAUTHN_RP_NAME, v.WEBAUTHN_ORIGINS ?? defaultWebauthnOrigin(v.PORT), problems);

  const publicUrl = (v.PUBLIC_URL ?? `http://localhost:${v.PORT}`).replace(/\/+$/, '');
  const publicUrlIssue = publicUrlProblem(publicUrl);
  if (publicUrlIssue !== undefined) problems.push(`PUBLIC_URL: ${publicUrlIssue}, got "${v.PUBLIC_URL ?? ''}"`);
  const oauth = oauthSettings(
    {
      str: read.str,
      secret: read.secret,
      bool: (name, fallback) => readSetting(name, { kind: 'bool', default: fallback, doc: '' }, read, problems) as boolean,
      list: (name) => readSetting(name, { kind: 'list', doc: '' }, read, problems) as string[],
    },
    problems,
  );

  // The key files are the keys module's to check, reported here with every other problem.
  problems.push(...keyFileProblems(v));

  const config: Config = {
    host: v.HOST,
    port: v.PORT,
    metricsPort: v.METRICS_PORT,
    admin: { host: v.ADMIN_HOST, port: v.ADMIN_PORT },
    databaseUrl: v.DATABASE_URL,
    databasePoolMax: v.DATABASE_POOL_MAX,
    databasePoolMode: v.DATABASE_POOL_MODE,
    dataDir: path.resolve(v.DATA_DIR),
    migrateOnStart: v.MIGRATE_ON_START,
    jwt: {
      privateKeyFile: v.JWT_PRIVATE_KEY_FILE,
      publicKeyFiles: v.JWT_PUBLIC_KEY_FILES,
      issuer: v.JWT_ISSUER,
      audience: v.JWT_AUDIENCE,
      accessTokenTtlSeconds: v.ACCESS_TOKEN_TTL_SECONDS,
      accessTokenCacheSize: v.ACCESS_TOKEN_CACHE_SIZE,
    },
    codeHmacKeyFile: v.CODE_HMAC_KEY_FILE,
    mfaKeyFile: v.MFA_KEY_FILE,
    webhookKeyFile: v.WEBHOOK_KEY_FILE,
    webhooks: { allowPrivateNetworks: v.WEBHOOK_ALLOW_PRIVATE_NETWORKS },
    totpIssuer: v.TOTP_ISSUER,
    webauthn,
    sessionTtlSeconds: v.SESSION_TTL_SECONDS,
    verificationCodeTtlSeconds: v.VERIFICATION_CODE_TTL_SECONDS,
    unverifiedAccountTtlSeconds: v.UNVERIFIED_ACCOUNT_TTL_SECONDS,
    oneTimeCodeTtlSeconds: v.ONE_TIME_CODE_TTL_SECONDS,
    passwordResetUrl: v.PASSWORD_RESET_URL,
    refreshReuseGraceSeconds: v.REFRESH_REUSE_GRACE_SECONDS,
    smtp,
    trustProxy: v.TRUST_PROXY,
    corsOrigins: v.CORS_ORIGINS,
    logLevel: v.LOG_LEVEL,
    demoPage: v.DEMO_PAGE,
    argon2: { memoryCost: v.ARGON2_MEMORY_KIB, timeCost: v.ARGON2_TIME_COST, parallelism: v.ARGON2_PARALLELISM },
    rateLimits: settingsOf(v, RATE_LIMIT_SETTINGS),
    retention: settingsOf(v, RETENTION_SETTINGS),
    passwordBreach: { check: v.PASSWORD_BREACH_CHECK, apiUrl: v.PASSWORD_BREACH_API_URL },
    publicUrl,
    oauth,
    reauthMaxAgeSeconds: v.REAUTH_MAX_AGE_SECONDS,
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

/** `{member: values[setting]}` for each member of `names` (a member-to-setting map such as {@link RATE_LIMIT_SETTINGS}). */
function settingsOf<M extends Record<string, keyof SettingValues>>(values: SettingValues, names: M): { readonly [K in keyof M]: SettingValues[M[K]] } {
  return Object.fromEntries(Object.entries(names).map(([member, setting]) => [member, values[setting]])) as { readonly [K in keyof M]: SettingValues[M[K]] };
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
function webauthnSettings(rpId: string, rpName: string, originsRaw: string, problems: string[]): WebauthnSettings {
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
