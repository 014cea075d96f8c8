import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';

/** The two kinds of identity provider (docs/api.md#sign-in-with-an-identity-provider). */
export type OAuthProviderType = 'oidc' | 'github';
/** How the provider returns its answer to the callback: in the query, or in a form it posts (OAuth 2.0 Form Post Response Mode). */
export type OAuthResponseMode = 'query' | 'form_post';

/** One configured identity provider (README "Configuration", `OAUTH_<ID>_*`). */
export interface OAuthProviderSettings {
  /** The provider's id in URLs and in identities (`^[a-z][a-z0-9_]{0,31}$`). */
  readonly id: string;
  readonly type: OAuthProviderType;
  /** The name a sign-in button shows. */
  readonly name: string;
  /**
   * `oidc`: the issuer identifier, found by discovery at `{issuer}/.well-known/openid-configuration`;
   * `github`: the web base URL (`https://github.com`), which also serves as the issuer of its identities.
   */
  readonly issuer: string;
  readonly clientId: string;
  /** Never logged and never sent anywhere but the provider's token endpoint. */
  readonly clientSecret: string;
  readonly scopes: readonly string[];
  readonly responseMode: OAuthResponseMode;
  /** `github`: the REST API base URL (`https://api.github.com`); undefined for `oidc`. */
  readonly apiUrl: string | undefined;
}

/** Sign-in with identity providers: the providers and where a flow may return. */
export interface OAuthSettings {
  /** OAUTH_PROVIDERS, in configured order; empty: no provider. */
  readonly providers: readonly OAuthProviderSettings[];
  /** OAUTH_REDIRECT_URLS: the app pages a flow may return to; the first is the default. */
  readonly redirectUrls: readonly string[];
  /** OAUTH_LINK_VERIFIED_EMAIL: link a provider's identity to the user with that verified email at sign-in. */
  readonly linkVerifiedEmail: boolean;
}

/** A provider id: a lowercase letter, then up to 31 lowercase letters, digits or underscores. */
export const PROVIDER_ID = /^[a-z][a-z0-9_]{0,31}$/;

/** Google's issuer, the `google` preset's default. */
export const GOOGLE_ISSUER = 'https://accounts.google.com';
/** GitHub's web and API base URLs, the `github` type's defaults. */
export const GITHUB_URL = 'https://github.com';
export const GITHUB_API_URL = 'https://api.github.com';
/** Default scopes: OpenID Connect's with the email and profile claims; GitHub's user profile and email addresses. */
export const DEFAULT_OIDC_SCOPES = 'openid email profile';
export const DEFAULT_GITHUB_SCOPES = 'read:user user:email';

/** How {@link oauthSettings} reads settings: the helpers of `loadConfig`. */
export interface SettingReader {
  str(name: string): string | undefined;
  secret(name: string): string | undefined;
  bool(name: string, fallback: boolean): boolean;
  list(name: string): string[];
}

/**
 * Whether `hostname` (as `URL.hostname` gives it) is a loopback host: `localhost`, a name under
 * `.localhost` (RFC 6761 §6.3), an address of 127.0.0.0/8, or `::1`.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return isIP(host) === 6 && host === '::1';
}

/**
 * The common checks of a URL setting: an absolute `http://` or `https://` URL with a host,
 * without user info, query or fragment (the `?` or `#` of an empty one included).
 * @returns the parsed URL, or the problem in words (`absolute` says what an absolute URL would be).
 */
function checkedUrl(raw: string, absolute: string): URL | string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `expected ${absolute}`;
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.hostname === '') return `expected ${absolute}`;
  if (url.username !== '' || url.password !== '') return 'expected a URL without user info';
  if (url.search !== '' || url.hash !== '' || raw.includes('?') || raw.includes('#')) return 'expected a URL without a query or fragment';
  return url;
}

/**
 * Why `raw` cannot be a provider URL (an issuer, GitHub's web or API base URL), or undefined: an
 * absolute `https://` URL, or `http://` on a loopback host only (a local test provider), without
 * user info, query or fragment.
 */
export function providerUrlProblem(raw: string): string | undefined {
  const url = checkedUrl(raw, 'an absolute https:// URL');
  if (typeof url === 'string') return url;
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) return 'http:// only for a loopback host (localhost, 127.0.0.1, ::1); expected https://';
  return undefined;
}

/** Why `raw` cannot be an entry of OAUTH_REDIRECT_URLS, or undefined (see {@link checkedUrl}). */
function redirectUrlProblem(raw: string): string | undefined {
  const url = checkedUrl(raw, 'an absolute http:// or https:// URL');
  return typeof url === 'string' ? url : undefined;
}

/** `raw` without a trailing `/` after the host or path (a URL that ends in `/` and one that does not name the same base). */
function withoutTrailingSlash(raw: string): string {
  return raw.replace(/\/+$/, '');
}

/**
 * The issuer two providers would share, compared as URLs: scheme and host case-insensitively,
 * a trailing `/` ignored (GitHub's issuer is its web URL). Two providers with one issuer would
 * make one identity of two accounts, so the service refuses to start.
 */
function issuerKey(issuer: string): string {
  try {
    return withoutTrailingSlash(new URL(issuer).href);
  } catch {
    return issuer;
  }
}

/**
 * Reads OAUTH_PROVIDERS, each provider's `OAUTH_<ID>_*` settings, OAUTH_REDIRECT_URLS and
 * OAUTH_LINK_VERIFIED_EMAIL (README "Configuration"), pushing every problem onto `problems`:
 * ids that break {@link PROVIDER_ID} or repeat; an unknown type or response mode; an `oidc`
 * provider without an issuer or without the `openid` scope; a provider URL that is not
 * `https://` (`http://` only on a loopback host); a missing client id or secret (`_FILE` reads
 * the secret from a file); two providers with one issuer; providers without OAUTH_REDIRECT_URLS.
 */
export function oauthSettings(read: SettingReader, problems: string[]): OAuthSettings {
  const ids = read.list('OAUTH_PROVIDERS');
  const providers: OAuthProviderSettings[] = [];
  const seenIssuers = new Map<string, string>();
  for (const [index, id] of ids.entries()) {
    if (!PROVIDER_ID.test(id)) {
      problems.push(`OAUTH_PROVIDERS: "${id}" is not a provider id (a lowercase letter, then up to 31 lowercase letters, digits or underscores)`);
      continue;
    }
    if (ids.indexOf(id) !== index) {
      problems.push(`OAUTH_PROVIDERS: "${id}" is listed twice`);
      continue;
    }
    const provider = providerSettings(read, id, problems);
    if (provider === undefined) continue;
    const key = issuerKey(provider.issuer);
    const other = seenIssuers.get(key);
    if (other !== undefined) problems.push(`OAUTH_PROVIDERS: "${other}" and "${id}" have the same issuer ${provider.issuer}; one identity cannot belong to two providers`);
    else seenIssuers.set(key, id);
    providers.push(provider);
  }
  const redirectUrls = read.list('OAUTH_REDIRECT_URLS');
  for (const raw of redirectUrls) {
    const problem = redirectUrlProblem(raw);
    if (problem !== undefined) problems.push(`OAUTH_REDIRECT_URLS: ${problem}, got "${raw}"`);
  }
  if (ids.length > 0 && redirectUrls.length === 0) problems.push('OAUTH_REDIRECT_URLS: required when OAUTH_PROVIDERS is set (the app pages a sign-in may return to)');
  return { providers, redirectUrls, linkVerifiedEmail: read.bool('OAUTH_LINK_VERIFIED_EMAIL', false) };
}

/** The `OAUTH_<ID>_*` settings of provider `id`, or undefined when they are too broken to use (the problems are pushed). */
function providerSettings(read: SettingReader, id: string, problems: string[]): OAuthProviderSettings | undefined {
  const prefix = `OAUTH_${id.toUpperCase()}_`;
  const name = (suffix: string): string => `${prefix}${suffix}`;
  const typeRaw = read.str(name('TYPE')) ?? (id === 'github' ? 'github' : 'oidc');
  if (typeRaw !== 'oidc' && typeRaw !== 'github') {
    problems.push(`${name('TYPE')}: expected oidc or github, got "${typeRaw}"`);
    return undefined;
  }
  const type: OAuthProviderType = typeRaw;
  const responseModeRaw = read.str(name('RESPONSE_MODE')) ?? 'query';
  let responseMode: OAuthResponseMode = 'query';
  if (responseModeRaw === 'query' || responseModeRaw === 'form_post') responseMode = responseModeRaw;
  else problems.push(`${name('RESPONSE_MODE')}: expected query or form_post, got "${responseModeRaw}"`);

  const clientId = read.str(name('CLIENT_ID'));
  if (clientId === undefined) problems.push(`${name('CLIENT_ID')}: required (the client id registered at the provider)`);
  const clientSecret = clientSecretOf(read, name('CLIENT_SECRET'), problems);

  const scopes = (read.str(name('SCOPES')) ?? (type === 'github' ? DEFAULT_GITHUB_SCOPES : DEFAULT_OIDC_SCOPES)).split(/\s+/).filter((s) => s !== '');
  if (type === 'oidc' && !scopes.includes('openid')) problems.push(`${name('SCOPES')}: an oidc provider needs the openid scope, got "${scopes.join(' ')}"`);

  const checkUrl = (setting: string, raw: string): string => {
    const problem = providerUrlProblem(raw);
    if (problem !== undefined) problems.push(`${setting}: ${problem}, got "${raw}"`);
    return withoutTrailingSlash(raw);
  };
  let issuer: string;
  let apiUrl: string | undefined;
  if (type === 'oidc') {
    for (const unused of ['URL', 'API_URL']) {
      if (read.str(name(unused)) !== undefined) problems.push(`${name(unused)}: only for the github type; an oidc provider is found by its issuer (${name('ISSUER')})`);
    }
    const issuerRaw = read.str(name('ISSUER')) ?? (id === 'google' ? GOOGLE_ISSUER : undefined);
    if (issuerRaw === undefined) {
      problems.push(`${name('ISSUER')}: required for an oidc provider (the issuer whose /.well-known/openid-configuration describes it)`);
      return undefined;
    }
    // The issuer is kept as written: discovery compares it with the provider's own, exactly.
    const problem = providerUrlProblem(issuerRaw);
    if (problem !== undefined) problems.push(`${name('ISSUER')}: ${problem}, got "${issuerRaw}"`);
    issuer = issuerRaw;
  } else {
    if (read.str(name('ISSUER')) !== undefined) problems.push(`${name('ISSUER')}: not used by the github type (set ${name('URL')} and ${name('API_URL')} for GitHub Enterprise Server)`);
    issuer = checkUrl(name('URL'), read.str(name('URL')) ?? GITHUB_URL);
    apiUrl = checkUrl(name('API_URL'), read.str(name('API_URL')) ?? GITHUB_API_URL);
  }
  const displayName = read.str(name('NAME')) ?? (id === 'google' ? 'Google' : id === 'github' ? 'GitHub' : id);
  return { id, type, name: displayName, issuer, clientId: clientId ?? '', clientSecret: clientSecret ?? '', scopes, responseMode, apiUrl };
}

/** `<NAME>` or the file named by `<NAME>_FILE` (one of them, required), taken as given but for a final line break. */
function clientSecretOf(read: SettingReader, setting: string, problems: string[]): string | undefined {
  const file = read.str(`${setting}_FILE`);
  const direct = read.secret(setting);
  if (file !== undefined && direct !== undefined) {
    problems.push(`${setting} and ${setting}_FILE: set one of them, not both`);
    return direct;
  }
  if (file !== undefined) {
    try {
      const value = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
      if (value === '') problems.push(`${setting}_FILE: ${file} is empty`);
      return value;
    } catch (err) {
      problems.push(`${setting}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
      return undefined;
    }
  }
  if (direct === undefined) problems.push(`${setting}: required (or ${setting}_FILE), the client secret registered at the provider`);
  return direct;
}

/**
 * Why `raw` cannot be PUBLIC_URL, or undefined: an absolute http(s) URL of the service's origin,
 * without user info, path, query or fragment (the callback URL is `{PUBLIC_URL}/auth/v0/oauth/{id}/callback`,
 * and the flow cookie's path `/auth/v0/oauth` must be that URL's path).
 */
export function publicUrlProblem(raw: string): string | undefined {
  const url = checkedUrl(raw, 'an absolute URL such as https://auth.example.com');
  if (typeof url === 'string') return url;
  if (url.pathname !== '/') return 'expected the service\'s origin only, without a path (the service answers under /auth/v0 of it)';
  return undefined;
}
