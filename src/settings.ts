/**
 * Every environment variable the service reads, declared once: its kind (with bounds or allowed
 * values), its default and the sentence README.md's "Configuration" table gives for it.
 *
 * - `loadConfig` (src/config.ts) reads and checks each setting by its declaration
 *   ({@link SettingValues} is the type of what it reads), then applies the rules that involve
 *   several settings.
 * - `npm run config-docs` writes README.md's table from it ({@link renderConfigurationTable});
 *   test/unit/config-docs.test.ts fails when README.md differs.
 *
 * A `doc` says `{range}` (an `int`'s bounds: `30 to 86400`) or `{max}` (its upper bound), and may
 * say `{values}` (an `enum`'s values: `` `none`, `starttls` or `tls` ``), so the table cannot
 * drift from what is checked.
 */
import { DEFAULT_ACCESS_TOKEN_CACHE_SIZE } from './modules/tokens/access-token.service.js';
import { DEFAULT_GITHUB_SCOPES, DEFAULT_OIDC_SCOPES, GITHUB_API_URL, GITHUB_URL, GOOGLE_ISSUER } from './modules/oauth/oauth.config.js';

/** What every declaration has: the README's sentence, and the Default column's text when the value alone does not say it. */
interface SettingDoc {
  /** README "Configuration", Meaning column (Markdown; `{range}`, `{max}` and `{values}` are filled in). */
  readonly doc: string;
  /** README Default column, when the default is not a plain value (unset, derived, required...). */
  readonly shownDefault?: string;
}

/** An integer written in decimal digits, from `min` to `max`; `default` undefined: unset is a value of its own. */
export interface IntSetting<D extends number | undefined = number | undefined> extends SettingDoc {
  readonly kind: 'int';
  readonly default: D;
  readonly min: number;
  readonly max: number;
  /** Words after the default in the README (`30 days`). */
  readonly defaultNote?: string;
}

/** `true`/`1` or `false`/`0`. */
export interface BoolSetting extends SettingDoc {
  readonly kind: 'bool';
  readonly default: boolean;
}

/**
 * A string, trimmed (unless `secret`), empty as unset. `check` says what is wrong with a set value
 * (the text after `NAME: `), or undefined. `fromFile`: `<NAME>_FILE` may name a file holding the
 * value (Docker and Kubernetes secrets).
 */
export interface TextSetting<D extends string | undefined = string | undefined> extends SettingDoc {
  readonly kind: 'text';
  readonly default: D;
  readonly secret?: boolean;
  readonly fromFile?: boolean;
  readonly check?: (value: string) => string | undefined;
}

/** One of `values`, exactly (after trimming). */
export interface EnumSetting<V extends string = string> extends SettingDoc {
  readonly kind: 'enum';
  readonly values: readonly V[];
  readonly default: V;
}

/** Comma-separated values, each trimmed, empty ones dropped; `check` says what is wrong with one (the text after `NAME: `). */
export interface ListSetting extends SettingDoc {
  readonly kind: 'list';
  readonly check?: (item: string) => string | undefined;
}

/**
 * A file or directory path, trimmed. Read and checked by the module that uses it (key files: the
 * keys module, src/modules/keys/keys.config.ts), still at start and in the same message.
 */
export interface PathSetting<D extends string | undefined = string | undefined> extends SettingDoc {
  readonly kind: 'path';
  readonly default: D;
}

/**
 * Documented here, read and checked by its own module: the identity providers' settings
 * (src/modules/oauth/oauth.config.ts), some of which are per provider (`OAUTH_<ID>_*`).
 */
export interface ModuleSetting extends SettingDoc {
  readonly kind: 'module';
}

export type Setting = IntSetting | BoolSetting | TextSetting | EnumSetting | ListSetting | PathSetting | ModuleSetting;

const int = <D extends number | undefined>(s: Omit<IntSetting<D>, 'kind'>): IntSetting<D> => ({ kind: 'int', ...s });
const bool = (s: Omit<BoolSetting, 'kind'>): BoolSetting => ({ kind: 'bool', ...s });
const text = <D extends string | undefined>(s: Omit<TextSetting<D>, 'kind'>): TextSetting<D> => ({ kind: 'text', ...s });
const oneOf = <const V extends string>(s: Omit<EnumSetting<V>, 'kind'>): EnumSetting<V> => ({ kind: 'enum', ...s });
const list = (s: Omit<ListSetting, 'kind'>): ListSetting => ({ kind: 'list', ...s });
const filePath = <D extends string | undefined>(s: Omit<PathSetting<D>, 'kind'>): PathSetting<D> => ({ kind: 'path', ...s });
const byModule = (s: Omit<ModuleSetting, 'kind'>): ModuleSetting => ({ kind: 'module', ...s });

/** Bounds (README "Configuration"), in seconds unless named otherwise. */
const MAX_PORT = 65535;
const ONE_DAY = 86_400;
/** OWASP Password Storage Cheat Sheet, argon2id first configuration: the defaults and the lowest accepted values (memory in KiB). */
export const OWASP_ARGON2_MINIMUM = Object.freeze({ memoryCost: 19456, timeCost: 2, parallelism: 1 });
/** argon2id upper bounds: 4 GiB of memory, 100 passes, 16 lanes (beyond them a sign-in takes seconds). */
const MAX_ARGON2_MEMORY_KIB = 4 * 1024 * 1024;
const MAX_ARGON2_TIME_COST = 100;
const MAX_ARGON2_PARALLELISM = 16;
/** A million verified tokens take about 1.1 GiB (1.2 KB each): more than a process should hold. */
const MAX_ACCESS_TOKEN_CACHE_SIZE = 1_000_000;
const MAX_RATE_LIMIT = 1_000_000;
/** NIST SP 800-63B-4 §3.2.2: at most 100 consecutive failed attempts on one account. */
const NIST_MAX_FAILED_ATTEMPTS = 100;
/** Longest retention accepted: ten years, beyond any legal hold of this data. */
const MAX_RETENTION_DAYS = 3650;
/** The largest pool of PostgreSQL connections accepted. */
const MAX_POOL = 1000;

/** The public Pwned Passwords range endpoint. */
export const DEFAULT_PASSWORD_BREACH_API_URL = 'https://api.pwnedpasswords.com/range/';
/**
 * Default `iss` and `aud`: the service's name, so that tokens of a zero-configuration instance
 * say where they come from. A deployment sets its public URL (`JWT_ISSUER`) and the name its
 * resource servers expect (`JWT_AUDIENCE`), README "Configuration".
 */
export const DEFAULT_JWT_ISSUER = 'latchkey';
export const DEFAULT_JWT_AUDIENCE = 'latchkey';
/** The port the service listens on by default. */
export const DEFAULT_PORT = 3000;

/**
 * Why `raw` cannot serve as the password-breach range endpoint (the 5-character hash prefix is
 * appended to it), or undefined: an absolute http or https URL (RFC 3986 §4.3) ending in `/`,
 * without a query or fragment.
 */
export function rangeUrlProblem(raw: string): string | undefined {
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

/** Longest TOTP_ISSUER, in characters. */
const MAX_TOTP_ISSUER_LENGTH = 64;

/**
 * The declaration, in README order. Rate-limit defaults (docs/security.md, rate limits): 10
 * failures per identifier from one client and 50 per client in 15 minutes; 100 failures per
 * account per hour, the most NIST SP 800-63B-4 §3.2.2 allows (also its upper bound here); 20
 * failed verifications per client in 15 minutes (four codes' worth of tries); 20 sign-ups and
 * 20 resends per client per hour (a family or an office behind one address signs up and asks
 * again now and then; a script needs far more); email-change requests 5 per user per hour (each
 * can mail a code to an address of the requester's choice; a person moving their account needs
 * a few); wrong second-factor codes 10 per account per hour (with 5 tries per challenge and
 * three live codes in the one-step drift window, under 1 chance in 30,000 an hour for someone
 * who has the password); admin API 600 per key per minute (far above what a backend acting for
 * its support staff needs, and a bound on what a leaked key can do before it is revoked).
 *
 * Retention defaults in days (docs/operations.md, "Retention"): sessions a month (history for
 * audits and support questions); codes, sent emails and delivered webhooks a week (to answer
 * "my code did not arrive"); dead emails and dead deliveries a month (operators list and retry
 * them after an incident); admin audit entries a year ("who did this to my account?").
 */
export const SETTINGS = {
  HOST: text({ default: '127.0.0.1', doc: 'listen address' }),
  PORT: int({ default: DEFAULT_PORT, min: 0, max: MAX_PORT, doc: 'listen port ({range})' }),
  DATABASE_URL: text({
    default: undefined,
    fromFile: true,
    shownDefault: 'unset: embedded PGlite in `DATA_DIR/pglite`',
    doc: '`postgres://` URL of PostgreSQL 15+',
    check: (v) => (/^postgres(ql)?:\/\//.test(v) ? undefined : 'expected a postgres:// or postgresql:// URL'),
  }),
  DATABASE_POOL_MAX: int({ default: 10, min: 1, max: MAX_POOL, doc: 'largest number of pooled PostgreSQL connections ({range})' }),
  DATABASE_POOL_MODE: oneOf({
    values: ['session', 'transaction'],
    default: 'session',
    doc: '`transaction` behind PgBouncer in transaction mode: no start-up parameters and no named statements (set the statement timeouts on the role instead); `session` for a direct connection ([operations.md](docs/operations.md#behind-a-connection-pooler-pgbouncer-in-transaction-mode))',
  }),
  DATA_DIR: filePath({
    default: './data',
    doc: 'embedded database and generated development signing key; one process at a time on the embedded database (locked by `DATA_DIR/pglite.lock`, a second process is refused)',
  }),
  MIGRATE_ON_START: bool({
    default: true,
    doc: 'apply pending migrations at start (under a transaction-scoped advisory lock, so instances starting together migrate once, behind a pooler too); with `false` the service refuses to start on a schema that is behind',
  }),
  JWT_PRIVATE_KEY_FILE: filePath({
    default: undefined,
    shownDefault: 'unset: key generated once into `DATA_DIR/jwt-signing-key.pem`',
    doc: 'PEM RSA private key (2048 bits or more), the active signing key',
  }),
  JWT_PUBLIC_KEY_FILES: list({ doc: 'comma-separated PEM public keys of retired signing keys, still published in the JWKS and accepted' }),
  CODE_HMAC_KEY_FILE: filePath({
    default: undefined,
    shownDefault: 'unset: derived from the signing key',
    doc: 'file of at least 32 random bytes (`openssl rand -base64 48`), the key under which verification and reset codes are stored; with it, switching the signing key leaves pending codes valid (docs/decisions.md). Setting it for the first time is itself a key change: codes pending then stop matching, once (verify-email and reset confirm answer 410 `code_mismatch`; users ask for a new code). Give every instance the same file',
  }),
  JWT_ISSUER: text({
    default: DEFAULT_JWT_ISSUER,
    doc: '`iss` claim, checked on every request. In production set it to the service\'s public URL (`https://auth.example.com`): an issuer identifier is best a URL the verifiers know (RFC 9068 §2.2)',
  }),
  JWT_AUDIENCE: text({ default: DEFAULT_JWT_AUDIENCE, doc: '`aud` claim, checked on every request: the name your resource servers expect, for example `https://api.example.com`' }),
  ACCESS_TOKEN_TTL_SECONDS: int({ default: 900, min: 30, max: ONE_DAY, doc: 'access token lifetime ({range})' }),
  ACCESS_TOKEN_CACHE_SIZE: int({
    default: DEFAULT_ACCESS_TOKEN_CACHE_SIZE,
    min: 0,
    max: MAX_ACCESS_TOKEN_CACHE_SIZE,
    doc: 'most verified access tokens kept in memory, so that a token presented again skips the RS256 verification (its session is still checked on every request); about 1.2 KB each; `0` turns the cache off ({range}; [docs/performance.md](docs/performance.md))',
  }),
  SESSION_TTL_SECONDS: int({
    default: 30 * ONE_DAY,
    defaultNote: '30 days',
    min: 60,
    max: 365 * ONE_DAY,
    doc: 'absolute session lifetime = refresh token lifetime = cookie `Max-Age` ({range})',
  }),
  VERIFICATION_CODE_TTL_SECONDS: int({ default: 900, min: 60, max: ONE_DAY, doc: 'verification code lifetime ({range})' }),
  // A week (docs/api.md#unverified-accounts-expire): long enough to come back to a forgotten
  // verification email, short enough that a squatted username or address is soon free again. At
  // least a day, the longest code lifetime, so the first code always expires before its account;
  // at most the longest retention.
  UNVERIFIED_ACCOUNT_TTL_SECONDS: int({
    default: 7 * ONE_DAY,
    defaultNote: '7 days',
    min: ONE_DAY,
    max: MAX_RETENTION_DAYS * ONE_DAY,
    doc: 'a user whose email was never verified is deleted this long after sign-up by the retention worker, freeing its username, email and phone ({range}; users without email are never affected; [docs/api.md](docs/api.md#unverified-accounts-expire))',
  }),
  MFA_KEY_FILE: filePath({
    default: undefined,
    doc: 'a file of at least 32 random bytes (`openssl rand -base64 48 > mfa.key`): the source of the keys that encrypt TOTP secrets and hash recovery codes. Unset: generated once into `DATA_DIR/mfa-key`. Every instance sharing a database needs the same file; back it up: without it no TOTP secret can be read ([docs/api.md](docs/api.md#second-factor))',
  }),
  WEBHOOK_KEY_FILE: filePath({
    default: undefined,
    doc: 'a file of at least 32 random bytes: the source of the key that encrypts webhook endpoints\' secrets. Unset: generated once into `DATA_DIR/webhook-key`. Every instance sharing a database, and the CLI, need the same file ([docs/operations.md](docs/operations.md#webhook-delivery))',
  }),
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: bool({
    default: false,
    doc: 'deliver webhooks to loopback and private addresses too (RFC 1918, fc00::/7), never to link-local ones; for development and tests, the same on every instance ([docs/api.md](docs/api.md#webhook-destinations))',
  }),
  TOTP_ISSUER: text({
    default: 'Latchkey',
    doc: `the issuer authenticator apps show beside the account (at most ${MAX_TOTP_ISSUER_LENGTH} characters, no \`:\`)`,
    check: (v) => (v.length > MAX_TOTP_ISSUER_LENGTH || v.includes(':') ? `at most ${MAX_TOTP_ISSUER_LENGTH} characters, without ":"` : undefined),
  }),
  WEBAUTHN_RP_ID: text({
    default: 'localhost',
    doc: 'the passkeys\' relying party id: the registrable domain of your app (`example.com`), never a URL; passkeys are bound to it for good ([docs/integration.md](docs/integration.md#passkeys))',
  }),
  WEBAUTHN_RP_NAME: text({ default: 'Latchkey', doc: 'the name authenticators show for your service (at most 64 characters)' }),
  WEBAUTHN_ORIGINS: text({
    default: undefined,
    shownDefault: '`http://localhost:<PORT>`',
    doc: 'comma-separated exact origins of the pages that register and use passkeys (`https://app.example.com`; `http://` only for localhost), each on `WEBAUTHN_RP_ID` or a subdomain of it; the service refuses to start otherwise',
  }),
  ONE_TIME_CODE_TTL_SECONDS: int({ default: 900, min: 60, max: ONE_DAY, doc: 'password-reset and email-change code lifetime ({range})' }),
  PASSWORD_RESET_URL: text({
    default: undefined,
    shownDefault: 'unset: the reset email carries the code only',
    doc: 'absolute `http://` or `https://` URL of your app\'s reset page; the reset email then also links to `{PASSWORD_RESET_URL}#email=<urlencoded>&code=<code>`, built from this setting only, never from request headers ([docs/api.md](docs/api.md#request-a-password-reset))',
    check: (v) => (isAbsoluteHttpUrl(v) ? undefined : `expected an absolute http:// or https:// URL without a fragment, got "${v}"`),
  }),
  PUBLIC_URL: text({
    default: undefined,
    shownDefault: '`http://localhost:<PORT>`',
    doc: 'the service\'s public origin (no path); identity providers send the browser back to `{PUBLIC_URL}/auth/v0/oauth/{id}/callback`, the redirect URI to register at each provider',
  }),
  OAUTH_PROVIDERS: byModule({
    shownDefault: 'unset: no provider',
    doc: 'comma-separated provider ids (`^[a-z][a-z0-9_]{0,31}$`), in the order of the sign-in buttons ([docs/integration.md](docs/integration.md#sign-in-with-an-identity-provider)); two providers may not share an issuer',
  }),
  'OAUTH_<ID>_TYPE': byModule({ shownDefault: '`oidc` (`github` for the id `github`)', doc: '`oidc` (any OpenID Provider, found by discovery) or `github`; `<ID>` is the id in upper case' }),
  'OAUTH_<ID>_ISSUER': byModule({
    shownDefault: `\`${GOOGLE_ISSUER}\` for \`google\`; else required for \`oidc\``,
    doc: 'the issuer, whose `/.well-known/openid-configuration` describes the provider; `https://`, or `http://` for a loopback host only',
  }),
  'OAUTH_<ID>_CLIENT_ID': byModule({ shownDefault: 'required', doc: 'the client id registered at the provider' }),
  'OAUTH_<ID>_CLIENT_SECRET': byModule({
    shownDefault: 'required',
    doc: 'the client secret registered at the provider; `OAUTH_<ID>_CLIENT_SECRET_FILE` reads it from a file. Sent only to the provider\'s token endpoint, never logged',
  }),
  'OAUTH_<ID>_SCOPES': byModule({ shownDefault: `\`${DEFAULT_OIDC_SCOPES}\`; \`${DEFAULT_GITHUB_SCOPES}\` for \`github\``, doc: 'space-separated; an `oidc` provider needs `openid`' }),
  'OAUTH_<ID>_NAME': byModule({ shownDefault: '`Google`, `GitHub`, else the id', doc: 'the name the providers list gives for the button' }),
  'OAUTH_<ID>_RESPONSE_MODE': byModule({ shownDefault: '`query`', doc: '`query` or `form_post` (the provider posts its answer)' }),
  'OAUTH_<ID>_URL': byModule({
    shownDefault: `\`${GITHUB_URL}\``,
    doc: '`github` type only: GitHub Enterprise Server\'s web base URL (`https://github.example.com`); `http://` for a loopback host only',
  }),
  'OAUTH_<ID>_API_URL': byModule({
    shownDefault: `\`${GITHUB_API_URL}\``,
    doc: '`github` type only: GitHub Enterprise Server\'s API base URL (`https://github.example.com/api/v3`); `http://` for a loopback host only',
  }),
  OAUTH_REDIRECT_URLS: byModule({
    shownDefault: 'required with `OAUTH_PROVIDERS`',
    doc: 'comma-separated absolute URLs (no query, no fragment, no user info) of the app pages a flow may return to; a page under one of them (its path at a `/`) is allowed too; the first is the default ([docs/api.md](docs/api.md#redirect_to))',
  }),
  OAUTH_LINK_VERIFIED_EMAIL: byModule({
    shownDefault: '`false`',
    doc: '`true`: a provider\'s sign-in whose verified email belongs to a user with that address verified links the identity to that user (with a notice) instead of answering `auth.oauth.account_exists`; never to an unverified address ([docs/security.md](docs/security.md#10-identity-providers))',
  }),
  // 10 minutes, about the time a person takes from signing in again to finishing the change that
  // asked for it; at least a minute (a provider's sign-in page takes that), at most a day.
  REAUTH_MAX_AGE_SECONDS: int({
    default: 600,
    min: 60,
    max: ONE_DAY,
    doc: 'how recently a session must have signed in for link, unlink and setting a first password, and, for a user without a password, for the operations that otherwise ask for it ({range}; [docs/api.md](docs/api.md#recent-sign-in))',
  }),
  // Off by default: the strict rule (docs/api.md#reuse-detection). At most 300 s: one JWKS cache
  // lifetime is far beyond two racing tabs.
  REFRESH_REUSE_GRACE_SECONDS: int({
    default: 0,
    min: 0,
    max: 300,
    doc: '`0` is the strict rule: any reuse of a rotated token revokes the session. Above `0` (at most {max}): the immediate parent of the live refresh token, presented again within that many seconds of its rotation (two tabs refreshing at once), gets the same live token back; older tokens, or the parent later, are still reuse (docs/decisions.md).',
  }),
  SMTP_HOST: text({ default: undefined, shownDefault: 'unset: emails are written to the log, with a warning at start', doc: 'SMTP server' }),
  // Unset: 587, the submission port with STARTTLS (RFC 6409), or 465 with implicit TLS (RFC 8314), in config.ts.
  SMTP_PORT: int({ default: undefined, min: 1, max: MAX_PORT, shownDefault: '`587` (`465` when `SMTP_TLS=tls`)', doc: 'SMTP server port ({range})' }),
  SMTP_TLS: oneOf({ values: ['none', 'starttls', 'tls'], default: 'starttls', doc: '`none` (plain, never upgrades), `starttls` (upgrade required) or `tls` (implicit TLS)' }),
  SMTP_CA_FILE: filePath({
    default: undefined,
    shownDefault: 'unset: Node\'s bundled CA roots',
    doc: 'PEM file of CA certificates trusted for the SMTP server\'s certificate in addition to the bundled roots (a relay with a private CA or a self-signed certificate); read at start, a missing file or one without a valid certificate stops the start. The certificate\'s host name is still checked.',
  }),
  SMTP_USERNAME: text({ default: undefined, secret: true, fromFile: true, doc: 'SMTP authentication user name (set both `SMTP_USERNAME` and `SMTP_PASSWORD`, or neither); taken as given, not trimmed' }),
  SMTP_PASSWORD: text({ default: undefined, secret: true, fromFile: true, doc: 'SMTP authentication password (set both `SMTP_USERNAME` and `SMTP_PASSWORD`, or neither); taken as given, not trimmed' }),
  SMTP_FROM: text({ default: undefined, shownDefault: 'required with `SMTP_HOST`', doc: 'sender address' }),
  SMTP_FROM_NAME: text({ default: undefined, doc: 'sender display name' }),
  TRUST_PROXY: bool({ default: false, doc: 'trust `X-Forwarded-For` for the session `ip` (set it only behind your own proxy)' }),
  CORS_ORIGINS: list({
    shownDefault: 'unset: no CORS',
    doc: 'comma-separated allowed origins such as `https://app.example.com`; credentials are allowed only for these; `*` is refused',
    check: (origin) => (origin === '*' || !/^https?:\/\/[^/\s]+$/.test(origin) ? `"${origin}" is not an origin like https://app.example.com (no wildcard, no path)` : undefined),
  }),
  LOG_LEVEL: oneOf({
    values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    default: 'info',
    doc: '{values}; JSON lines, or pino-pretty\'s coloured lines when stdout is a terminal',
  }),
  ADMIN_PORT: int({
    default: undefined,
    min: 0,
    max: MAX_PORT,
    shownDefault: 'unset: no admin API',
    doc: '{range}, not `PORT` nor `METRICS_PORT`: serve the [admin API](docs/admin-api.md) (`/admin/v0`, API keys from `latchkey admin-keys create`) on a listener of its own on this port; the public listener never serves it. Keep it on a private network ([docs/security.md](docs/security.md#11-the-admin-api))',
  }),
  ADMIN_HOST: text({ default: '127.0.0.1', doc: 'the admin listener\'s address, whatever `HOST` is' }),
  METRICS_PORT: int({
    default: undefined,
    min: 1,
    max: MAX_PORT,
    shownDefault: 'unset: `GET /metrics` on `PORT`',
    doc: '{range}, not `PORT`: serve `GET /metrics` only on this port (on `HOST`, by a second listener) and not on `PORT`, so the scrape endpoint can stay off the public listener',
  }),
  DEMO_PAGE: bool({
    default: false,
    doc: '`true` serves a demo page at `GET /auth/v0/demo` (sign up, verify, sign in, `/me`, refresh, sessions, change email, forgotten password, two-step sign-in with a QR code, passkeys, sign-in with the configured identity providers (list `{PUBLIC_URL}/auth/v0/demo` in `OAUTH_REDIRECT_URLS`) and linking them, delete account, log out from a browser; see [docs/integration.md](docs/integration.md)); otherwise that path is 404. For development only.',
  }),
  ARGON2_MEMORY_KIB: int({
    default: OWASP_ARGON2_MINIMUM.memoryCost,
    min: OWASP_ARGON2_MINIMUM.memoryCost,
    max: MAX_ARGON2_MEMORY_KIB,
    doc: 'argon2id memory cost in KiB ({range}); below OWASP\'s minimum (m=19456 KiB, t=2, p=1) is refused',
  }),
  ARGON2_TIME_COST: int({ default: OWASP_ARGON2_MINIMUM.timeCost, min: OWASP_ARGON2_MINIMUM.timeCost, max: MAX_ARGON2_TIME_COST, doc: 'argon2id passes ({range})' }),
  ARGON2_PARALLELISM: int({ default: OWASP_ARGON2_MINIMUM.parallelism, min: 1, max: MAX_ARGON2_PARALLELISM, doc: 'argon2id lanes ({range})' }),
  PASSWORD_BREACH_CHECK: oneOf({
    values: ['off', 'hibp'],
    default: 'off',
    doc: '{values}: with `hibp`, every new password (sign-up, change-password) that passes the local [password policy](docs/api.md#password-policy) is also looked up in Have I Been Pwned\'s Pwned Passwords with the k-anonymity range protocol, and refused with the operation\'s 400 if it appeared in a data breach. Only the first 5 hex characters of the password\'s SHA-1 leave the service. No answer within 2 s, a network error or a status other than 200: the password is accepted and one warning logged ([docs/security.md](docs/security.md#5-password-policy))',
  }),
  PASSWORD_BREACH_API_URL: text({
    default: DEFAULT_PASSWORD_BREACH_API_URL,
    doc: 'range endpoint for `PASSWORD_BREACH_CHECK=hibp`, an absolute `http://` or `https://` URL ending in `/` (no query); the 5-character prefix is appended to it. Point it at a mirror or proxy you run to keep even the prefix inside your network',
    check: (v) => {
      const problem = rangeUrlProblem(v);
      return problem === undefined ? undefined : `${problem}, got "${v}"`;
    },
  }),
  RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: int({
    default: 10,
    min: 0,
    max: MAX_RATE_LIMIT,
    doc: 'failed sign-ins per username, email or phone from one client per 15 minutes; then 429 `auth.sign_in.too_many_attempts` for that client until the window ends (0 disables, at most {max}). Also the checks of the current password per user, one budget for change-password, delete-account, change-email and the second factor\'s setup, disable and regeneration; twice it bounds the passkey registrations started per user',
  }),
  RATE_LIMIT_SIGN_IN_PER_IP: int({
    default: 50,
    min: 0,
    max: MAX_RATE_LIMIT,
    doc: 'failed sign-ins per client per 15 minutes (0 disables, at most {max}). A client is an IPv4 address or an IPv6 /64; `::ffff:a.b.c.d` counts as `a.b.c.d`',
  }),
  RATE_LIMIT_SIGN_IN_PER_ACCOUNT: int({
    default: NIST_MAX_FAILED_ATTEMPTS,
    min: 0,
    max: NIST_MAX_FAILED_ATTEMPTS,
    doc: 'failed sign-ins per account per hour, whichever identifier named it and from any client, wrong current passwords included; identifiers that name no account are counted alike, so the limit tells nobody who exists (NIST SP 800-63B-4: at most 100, so {range}; 0 disables, for tests only)',
  }),
  RATE_LIMIT_SIGN_UP_PER_IP: int({ default: 20, min: 0, max: MAX_RATE_LIMIT, doc: 'sign-ups per client per hour (0 disables, at most {max})' }),
  RATE_LIMIT_VERIFY_PER_IP: int({
    default: 20,
    min: 0,
    max: MAX_RATE_LIMIT,
    doc: 'failed email verifications per client per 15 minutes, on top of 5 tries per code (0 disables, at most {max}). Replaces `RATE_LIMIT_VERIFY_PER_ADDRESS`, which is refused at start: counted per address, anyone could block the owner\'s verification',
  }),
  RATE_LIMIT_RESEND_PER_IP: int({ default: 20, min: 0, max: MAX_RATE_LIMIT, doc: 'verification-code resends per client per hour, on top of one per address per 60 s (0 disables, at most {max})' }),
  RATE_LIMIT_PASSWORD_RESET_PER_IP: int({ default: 20, min: 0, max: MAX_RATE_LIMIT, doc: 'password-reset requests per client per hour, on top of one per address per 60 s (0 disables, at most {max})' }),
  RATE_LIMIT_PASSWORD_RESET_CONFIRM_PER_IP: int({ default: 20, min: 0, max: MAX_RATE_LIMIT, doc: 'failed password-reset confirmations per client per 15 minutes, on top of 5 tries per code (0 disables, at most {max})' }),
  RATE_LIMIT_MFA_PER_ACCOUNT: int({
    default: 10,
    min: 0,
    max: MAX_RATE_LIMIT,
    doc: 'wrong second-factor codes per account per hour, from any client, wherever typed (sign-in, disable, new recovery codes); the 5th within the hour emails the owner, once a day at most (0 disables, at most {max})',
  }),
  RATE_LIMIT_MFA_PER_IP: int({ default: 20, min: 0, max: MAX_RATE_LIMIT, doc: 'wrong second-factor codes at sign-in per client per 15 minutes (0 disables, at most {max})' }),
  RATE_LIMIT_CHANGE_EMAIL_PER_USER: int({ default: 5, min: 0, max: MAX_RATE_LIMIT, doc: 'email-change requests per user per hour, wrong passwords included (0 disables, at most {max})' }),
  RATE_LIMIT_CHANGE_EMAIL_CONFIRM_PER_IP: int({ default: 20, min: 0, max: MAX_RATE_LIMIT, doc: 'failed email-change confirmations per client per 15 minutes, on top of 5 tries per code (0 disables, at most {max})' }),
  RATE_LIMIT_ADMIN_PER_KEY: int({
    default: 600,
    min: 0,
    max: MAX_RATE_LIMIT,
    doc: 'admin API requests per API key per minute, every request counted; then 429 `admin.too_many_requests` with `Retry-After` (0 disables, at most {max})',
  }),
  RETENTION_SESSIONS_DAYS: int({
    default: 30,
    min: 0,
    max: MAX_RETENTION_DAYS,
    doc: 'days a session is kept after it expired or was revoked (whichever came first), with its refresh tokens and its device; then the retention worker deletes them ({range}; [docs/operations.md](docs/operations.md#retention))',
  }),
  RETENTION_VERIFICATION_CODES_DAYS: int({ default: 7, min: 0, max: MAX_RETENTION_DAYS, doc: 'days a verification or password-reset code is kept after it expired, was used or was superseded ({range})' }),
  RETENTION_OUTBOX_DAYS: int({ default: 7, min: 0, max: MAX_RETENTION_DAYS, doc: 'days a sent, suppressed or cancelled outbox row is kept after the email was queued ({range})' }),
  // At least a day, the longest code lifetime: a dead row is kept while `outbox retry` can still send its code.
  RETENTION_OUTBOX_DEAD_DAYS: int({
    default: 30,
    min: 1,
    max: MAX_RETENTION_DAYS,
    doc: 'days a dead outbox row is kept after the email was queued, for `outbox list` and `outbox retry` ({range}, at least `RETENTION_OUTBOX_DAYS`)',
  }),
  RETENTION_WEBHOOK_DAYS: int({
    default: 7,
    min: 0,
    max: MAX_RETENTION_DAYS,
    doc: 'days delivered webhook deliveries are kept after they were created, and events once none of their deliveries is left ({range})',
  }),
  RETENTION_WEBHOOK_DEAD_DAYS: int({
    default: 30,
    min: 0,
    max: MAX_RETENTION_DAYS,
    doc: 'days a dead webhook delivery (and its event) is kept, for `webhooks deliveries` and `webhooks retry` ({range}, at least `RETENTION_WEBHOOK_DAYS`)',
  }),
  RETENTION_ADMIN_AUDIT_DAYS: int({
    default: 365,
    min: 0,
    max: MAX_RETENTION_DAYS,
    doc: 'days an entry of the admin API\'s [audit log](docs/admin-api.md#audit-log) is kept after it was written ({range})',
  }),
} satisfies Record<string, Setting>;

/** The name of a declared setting. */
export type SettingName = keyof typeof SETTINGS;

/**
 * Settings that no longer exist, with what replaced them: refused at start rather than silently
 * ignored, so a deployment does not believe a limit holds that is gone.
 */
export const RETIRED_SETTINGS: Readonly<Record<string, string>> = {
  RATE_LIMIT_VERIFY_PER_ADDRESS: 'replaced by RATE_LIMIT_VERIFY_PER_IP (a count per address let anyone block the owner\'s verification; each code still allows 5 tries)',
};

/** The value a declaration reads to. */
type ValueOf<S> = S extends IntSetting<infer D>
  ? D extends number ? number : number | undefined
  : S extends BoolSetting
    ? boolean
    : S extends TextSetting<infer D> | PathSetting<infer D>
      ? D extends string ? string : string | undefined
      : S extends EnumSetting<infer V>
        ? V
        : S extends ListSetting
          ? readonly string[]
          : never;

/** What `loadConfig` reads from each declared setting (module settings excluded: their module reads them). */
export type SettingValues = {
  readonly [K in SettingName as (typeof SETTINGS)[K] extends ModuleSetting ? never : K]: ValueOf<(typeof SETTINGS)[K]>;
};

/** The markers around the generated table in README.md. */
export const TABLE_START = '<!-- configuration table: generated from src/settings.ts by `npm run config-docs`; edit it there -->';
export const TABLE_END = '<!-- end of configuration table -->';

/** `a`, `b` or `c`, in backticks. */
function orList(values: readonly string[]): string {
  const quoted = values.map((v) => `\`${v}\``);
  return quoted.length === 1 ? quoted[0]! : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)!}`;
}

/** The README Default column of a declaration. */
function shownDefault(setting: Setting): string {
  if (setting.shownDefault !== undefined) return setting.shownDefault;
  switch (setting.kind) {
    case 'int':
      if (setting.default === undefined) return 'unset';
      return `\`${setting.default}\`${setting.defaultNote === undefined ? '' : ` (${setting.defaultNote})`}`;
    case 'bool':
    case 'enum':
      return `\`${String(setting.default)}\``;
    case 'text':
    case 'path':
      return setting.default === undefined ? 'unset' : `\`${setting.default}\``;
    case 'list':
    case 'module':
      return 'unset';
  }
}

/**
 * The README Meaning column of a declaration: `doc` with `{range}` and `{values}` filled in, and
 * the `<NAME>_FILE` alternative of a `fromFile` setting.
 * @throws Error when an `int`'s doc says neither `{range}` nor `{max}` (its bounds would go unsaid) or a doc names a placeholder its kind has not.
 */
function meaning(name: string, setting: Setting): string {
  let doc = setting.doc;
  if (setting.kind === 'int') {
    if (!doc.includes('{range}') && !doc.includes('{max}')) throw new Error(`${name}: the doc of an int setting says {range} or {max}`);
    doc = doc.replaceAll('{range}', `${setting.min} to ${setting.max}`).replaceAll('{max}', String(setting.max));
  }
  if (setting.kind === 'enum') doc = doc.replaceAll('{values}', orList(setting.values));
  if (/\{(range|max|values)\}/.test(doc)) throw new Error(`${name}: {range}, {max} and {values} are for int and enum settings`);
  if (setting.kind === 'text' && setting.fromFile === true) doc += `; \`${name}_FILE\` reads it from a file instead`;
  return doc;
}

/** A Markdown table cell: `|` escaped, on one line. */
function cell(value: string): string {
  return value.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** README.md's "Configuration" table (Name, Default, Meaning), one row per declared setting, in declaration order. */
export function renderConfigurationTable(): string {
  const rows = Object.entries(SETTINGS as Record<string, Setting>).map(([name, setting]) => `| \`${name}\` | ${cell(shownDefault(setting))} | ${cell(meaning(name, setting))} |`);
  return ['| Name | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

/**
 * `readme` with the text between {@link TABLE_START} and {@link TABLE_END} replaced by
 * {@link renderConfigurationTable}.
 * @throws Error when the markers are missing or out of order.
 */
export function withConfigurationTable(readme: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start === -1 || end === -1 || end < start) throw new Error(`README.md: expected the markers ${TABLE_START} and ${TABLE_END} around the configuration table`);
  return `${readme.slice(0, start + TABLE_START.length)}\n${renderConfigurationTable()}\n${readme.slice(end)}`;
}
