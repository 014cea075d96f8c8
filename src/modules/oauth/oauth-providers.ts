import type { FastifyBaseLogger } from 'fastify';
import * as oidc from 'openid-client';
import type { Clock } from '../../clock.js';
import { AppError } from '../../errors.js';
import { EMAIL_MAX_LENGTH, normalizeEmail } from '../users/identifiers.js';
import type { OAuthProviderSettings } from './oauth.config.js';

/**
 * Seconds one request to a provider (discovery, code exchange, user information) may take before
 * it counts as unreachable: well above a provider's usual answer, well below a browser's patience.
 */
export const PROVIDER_TIMEOUT_SECONDS = 10;
/** First wait after a failed discovery, in milliseconds; doubled at each failure up to {@link DISCOVERY_RETRY_MAX_MS}. */
export const DISCOVERY_RETRY_BASE_MS = 2_000;
/** Longest wait between two discoveries of a provider that keeps failing: 5 minutes. */
export const DISCOVERY_RETRY_MAX_MS = 5 * 60_000;
/** GitHub's REST API version the service speaks (GitHub REST API, "API versions"). */
const GITHUB_API_VERSION = '2022-11-28';
/** The `User-Agent` of GitHub API calls: GitHub refuses requests without one. */
const GITHUB_USER_AGENT = 'Latchkey';

/** What a provider says about the account that signed in, once checked. */
export interface ProviderProfile {
  /** The provider's issuer identifier (the ID token's `iss`; GitHub: its web URL). */
  readonly issuer: string;
  /** The provider's stable id of the account (`sub`; GitHub: the numeric user id). */
  readonly subject: string;
  /** The account's email address, normalised, only when the provider says it is verified; else null. */
  readonly email: string | null;
  /** `preferred_username` (GitHub: `login`), when given. */
  readonly preferredUsername: string | null;
}

/** What a callback's exchange with the provider can fail with, as the redirect's `error` (docs/api.md#callback). */
export type ProviderFailureCode = 'auth.oauth.provider_error' | 'auth.oauth.provider_unavailable' | 'auth.oauth.invalid_response';

/** A failed exchange with a provider: the code the redirect carries; the cause is for the log only. */
export class ProviderFailure extends Error {
  constructor(
    readonly code: ProviderFailureCode,
    options: { cause?: unknown } = {},
  ) {
    super(code, options);
    this.name = 'ProviderFailure';
  }
}

/** What the authorization request carries (RFC 6749 §4.1.1, RFC 7636 §4.3, OpenID Connect Core §3.1.2.1). */
export interface AuthorizationRequest {
  readonly state: string;
  readonly codeChallenge: string;
  /** OpenID Connect only. */
  readonly nonce: string | undefined;
}

/** What the callback checks the provider's answer against: the flow's secrets. */
export interface CallbackChecks {
  /** The callback's query string as the browser sent it (without `?`). */
  readonly query: string;
  readonly state: string;
  readonly codeVerifier: string;
  readonly nonce: string | null;
}

/** The configured identity providers and the relying-party side of their flows (openid-client). */
export interface OAuthProviders {
  /** Every configured provider, in configured order. */
  readonly list: readonly OAuthProviderSettings[];
  /** The provider with this id, or undefined. */
  get(id: string): OAuthProviderSettings | undefined;
  /** `{PUBLIC_URL}/auth/v0/oauth/{id}/callback`, the redirect URI registered at the provider. */
  callbackUrl(id: string): string;
  /**
   * The URL to send the browser to: the provider's authorization endpoint with the client id,
   * `response_type=code`, the redirect URI, the scopes, `state`, the PKCE S256 challenge, and
   * for OpenID Connect the `nonce` (and `response_mode=form_post` when configured).
   * @throws AppError `auth.oauth.provider_unavailable` (503) while the provider's discovery fails.
   */
  authorizationUrl(provider: OAuthProviderSettings, request: AuthorizationRequest): Promise<URL>;
  /**
   * Completes a callback: checks the authorization response (`state`, and RFC 9207 `iss` where the
   * provider advertises it, or wherever it is present), exchanges the code with the PKCE
   * verifier, validates the ID token (its signature by the provider's JWKS, although it came
   * straight from the token endpoint; `iss`, `aud`, `exp`, `nonce`), and reads the account: the ID token's claims, or the UserInfo endpoint when they
   * hold no email; for GitHub, `GET /user` and `GET /user/emails` (the primary verified address).
   * @throws ProviderFailure with the redirect's code; never another error for a provider's answer.
   */
  complete(provider: OAuthProviderSettings, checks: CallbackChecks): Promise<ProviderProfile>;
  /** Starts the discovery of every OpenID provider in the background (a failure is retried with backoff, never thrown). */
  start(): void;
  /** Stops the retries. */
  stop(): void;
}

/** Dependencies of {@link createOAuthProviders}. */
export interface OAuthProvidersDeps {
  readonly providers: readonly OAuthProviderSettings[];
  /** PUBLIC_URL without a trailing `/`. */
  readonly publicUrl: string;
  /** The API's path prefix (`/auth/v0`). */
  readonly apiPrefix: string;
  readonly clock: Clock;
  readonly log: FastifyBaseLogger;
}

/** The discovery of one OpenID provider: its configuration once found, else when to try again. */
interface Discovery {
  config: oidc.Configuration | undefined;
  inFlight: Promise<oidc.Configuration> | undefined;
  failures: number;
  /** The clock's time (ms) before which a request does not start another discovery. */
  retryAt: number;
  timer: NodeJS.Timeout | undefined;
}

/**
 * How the client authenticates at the token endpoint: `client_secret_basic` (RFC 6749 §2.3.1),
 * the default of OpenID Connect Discovery §3, unless the provider lists only
 * `client_secret_post`; decided when the request is made, from the discovered metadata.
 */
function clientSecretAuth(secret: string): oidc.ClientAuth {
  const basic = oidc.ClientSecretBasic(secret);
  const post = oidc.ClientSecretPost(secret);
  return (as, client, body, headers) => {
    const methods = as.token_endpoint_auth_methods_supported;
    const usePost = Array.isArray(methods) && !methods.includes('client_secret_basic') && methods.includes('client_secret_post');
    return (usePost ? post : basic)(as, client, body, headers);
  };
}

/** Options of every Configuration: the timeout, and plain HTTP for a loopback provider (configuration allows no other). */
function applyTransport(config: oidc.Configuration, url: string): oidc.Configuration {
  config.timeout = PROVIDER_TIMEOUT_SECONDS;
  if (new URL(url).protocol === 'http:') oidc.allowInsecureRequests(config);
  return config;
}

/** GitHub as an OAuth 2.0 authorization server with its endpoints given explicitly (GitHub does not speak OpenID Connect). */
function githubConfiguration(p: OAuthProviderSettings): oidc.Configuration {
  const config = new oidc.Configuration(
    { issuer: p.issuer, authorization_endpoint: `${p.issuer}/login/oauth/authorize`, token_endpoint: `${p.issuer}/login/oauth/access_token` },
    p.clientId,
    { client_secret: p.clientSecret },
    oidc.ClientSecretPost(p.clientSecret),
  );
  return applyTransport(config, p.issuer);
}

/** The HTTP status of a failed provider call, when the error carries one. */
function statusOf(err: unknown): number | undefined {
  if (err instanceof oidc.ResponseBodyError || err instanceof oidc.WWWAuthenticateChallengeError) return err.status;
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Response ? cause.status : undefined;
}

/**
 * The redirect code of a failed call to a provider: the provider's own `error` parameter is
 * `provider_error`; no answer (refused, reset, timed out) or a server error (5xx) is
 * `provider_unavailable`; anything that does not check out is `invalid_response`.
 */
export function failureOf(err: unknown): ProviderFailure {
  if (err instanceof ProviderFailure) return err;
  if (err instanceof oidc.AuthorizationResponseError) return new ProviderFailure('auth.oauth.provider_error', { cause: err });
  const status = statusOf(err);
  if (status !== undefined) return new ProviderFailure(status >= 500 ? 'auth.oauth.provider_unavailable' : 'auth.oauth.invalid_response', { cause: err });
  const code = (err as { code?: unknown }).code;
  if (code === 'OAUTH_TIMEOUT' || code === 'OAUTH_ABORT') return new ProviderFailure('auth.oauth.provider_unavailable', { cause: err });
  // fetch() fails with a TypeError when there is no answer at all (connection refused, reset, DNS).
  if (err instanceof TypeError && !(typeof code === 'string' && code.startsWith('ERR_INVALID_ARG'))) return new ProviderFailure('auth.oauth.provider_unavailable', { cause: err });
  return new ProviderFailure('auth.oauth.invalid_response', { cause: err });
}

/** A claim as text, or null when absent, empty or not a string. */
function textClaim(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

/** The normalised address of an email claim, or null when it is not one a User may have. */
function emailClaim(value: unknown): string | null {
  const text = textClaim(value);
  if (text === null) return null;
  const email = normalizeEmail(text);
  return email.length <= EMAIL_MAX_LENGTH && /^[^\s@]+@[^\s@]+$/.test(email) ? email : null;
}

/** Builds the {@link OAuthProviders} of the configuration. */
export function createOAuthProviders(deps: OAuthProvidersDeps): OAuthProviders {
  const { providers, publicUrl, apiPrefix, clock, log } = deps;
  const byId = new Map(providers.map((p) => [p.id, p]));
  const discoveries = new Map<string, Discovery>(
    providers.filter((p) => p.type === 'oidc').map((p) => [p.id, { config: undefined, inFlight: undefined, failures: 0, retryAt: 0, timer: undefined }]),
  );
  const githubConfigs = new Map(providers.filter((p) => p.type === 'github').map((p) => [p.id, githubConfiguration(p)]));
  let stopped = true;

  const callbackUrl = (id: string): string => `${publicUrl}${apiPrefix}/oauth/${id}/callback`;

  /** One discovery of `p`; on failure the next one is due after a doubling wait, also started by a timer. */
  const discover = (p: OAuthProviderSettings, d: Discovery): Promise<oidc.Configuration> => {
    const attempt = (async () => {
      const found = await oidc.discovery(new URL(p.issuer), p.clientId, { client_secret: p.clientSecret }, clientSecretAuth(p.clientSecret), {
        timeout: PROVIDER_TIMEOUT_SECONDS,
        ...(new URL(p.issuer).protocol === 'http:' ? { execute: [oidc.allowInsecureRequests] } : {}),
      });
      applyTransport(found, p.issuer);
      // OpenID Connect Core §3.1.3.7 lets a client skip the signature of an ID token it got
      // straight from the token endpoint over TLS; this service checks it against the
      // provider's JWKS all the same (docs/security.md, "Identity providers").
      oidc.enableNonRepudiationChecks(found);
      return found;
    })();
    d.inFlight = attempt;
    attempt.then(
      (config) => {
        if (d.failures > 0) log.info({ provider: p.id }, 'identity provider discovered after earlier failures');
        d.config = config;
        d.failures = 0;
        d.inFlight = undefined;
      },
      (err: unknown) => {
        d.failures += 1;
        const waitMs = Math.min(DISCOVERY_RETRY_BASE_MS * 2 ** (d.failures - 1), DISCOVERY_RETRY_MAX_MS);
        d.retryAt = clock.now().getTime() + waitMs;
        d.inFlight = undefined;
        log.warn({ provider: p.id, issuer: p.issuer, failures: d.failures, retryInMs: waitMs, err: { message: (err as Error).message, code: (err as { code?: unknown }).code } }, 'identity provider discovery failed; it answers 503 until a retry succeeds');
        if (!stopped) {
          clearTimeout(d.timer);
          d.timer = setTimeout(() => {
            d.timer = undefined;
            if (!stopped && d.config === undefined && d.inFlight === undefined) discover(p, d).catch(() => undefined);
          }, waitMs);
          d.timer.unref();
        }
      },
    );
    return attempt;
  };

  /** The provider's openid-client Configuration, discovering it when due. @throws AppError `auth.oauth.provider_unavailable`. */
  const configuration = async (p: OAuthProviderSettings): Promise<oidc.Configuration> => {
    const github = githubConfigs.get(p.id);
    if (github !== undefined) return github;
    const d = discoveries.get(p.id)!;
    if (d.config !== undefined) return d.config;
    const pending = d.inFlight ?? (clock.now().getTime() >= d.retryAt ? discover(p, d) : undefined);
    if (pending === undefined) throw new AppError('auth.oauth.provider_unavailable');
    try {
      return await pending;
    } catch (err) {
      throw new AppError('auth.oauth.provider_unavailable', { cause: err });
    }
  };

  /** GET `path` of GitHub's REST API with the user's access token; the parsed JSON. @throws ProviderFailure. */
  const githubApi = async (p: OAuthProviderSettings, config: oidc.Configuration, accessToken: string, path: string): Promise<unknown> => {
    const headers = new Headers({ accept: 'application/vnd.github+json', 'x-github-api-version': GITHUB_API_VERSION, 'user-agent': GITHUB_USER_AGENT });
    const response = await oidc.fetchProtectedResource(config, accessToken, new URL(`${p.apiUrl!}${path}`), 'GET', undefined, headers);
    if (response.status >= 500) throw new ProviderFailure('auth.oauth.provider_unavailable', { cause: new Error(`GitHub API ${path} answered ${response.status}`) });
    if (response.status !== 200) throw new ProviderFailure('auth.oauth.invalid_response', { cause: new Error(`GitHub API ${path} answered ${response.status}`) });
    try {
      return (await response.json()) as unknown;
    } catch (err) {
      throw new ProviderFailure('auth.oauth.invalid_response', { cause: err });
    }
  };

  /** GitHub's account: the numeric id, the login and the primary verified email (GitHub REST API: "Users", "Emails"). */
  const githubProfile = async (p: OAuthProviderSettings, config: oidc.Configuration, accessToken: string): Promise<ProviderProfile> => {
    const user = (await githubApi(p, config, accessToken, '/user')) as { id?: unknown; login?: unknown } | null;
    const id = user?.id;
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) throw new ProviderFailure('auth.oauth.invalid_response', { cause: new Error('GitHub /user has no numeric id') });
    const emails = await githubApi(p, config, accessToken, '/user/emails');
    if (!Array.isArray(emails)) throw new ProviderFailure('auth.oauth.invalid_response', { cause: new Error('GitHub /user/emails is not an array') });
    const primary = (emails as { email?: unknown; primary?: unknown; verified?: unknown }[]).find((e) => e.primary === true && e.verified === true);
    return { issuer: p.issuer, subject: String(id), email: emailClaim(primary?.email), preferredUsername: textClaim(user?.login) };
  };

  /** The OpenID account: the ID token's claims, with the UserInfo endpoint's when the ID token holds no email. */
  const oidcProfile = async (config: oidc.Configuration, tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>): Promise<ProviderProfile> => {
    const claims = tokens.claims();
    if (claims === undefined) throw new ProviderFailure('auth.oauth.invalid_response', { cause: new Error('no ID token') });
    let info: Record<string, unknown> = claims;
    if (claims.email === undefined && config.serverMetadata().userinfo_endpoint !== undefined) {
      info = { ...claims, ...(await oidc.fetchUserInfo(config, tokens.access_token, claims.sub)) };
    }
    // An absent email_verified counts as not verified (docs/security.md, "Identity providers").
    const email = info.email_verified === true ? emailClaim(info.email) : null;
    return { issuer: claims.iss, subject: claims.sub, email, preferredUsername: textClaim(info.preferred_username) };
  };

  return {
    list: providers,
    get: (id) => byId.get(id),
    callbackUrl,

    async authorizationUrl(p, request) {
      const config = await configuration(p);
      return oidc.buildAuthorizationUrl(config, {
        redirect_uri: callbackUrl(p.id),
        scope: p.scopes.join(' '),
        state: request.state,
        code_challenge: request.codeChallenge,
        code_challenge_method: 'S256',
        ...(request.nonce === undefined ? {} : { nonce: request.nonce }),
        ...(p.responseMode === 'form_post' ? { response_mode: 'form_post' } : {}),
      });
    },

    async complete(p, checks) {
      let config: oidc.Configuration;
      try {
        config = await configuration(p);
      } catch (err) {
        throw new ProviderFailure('auth.oauth.provider_unavailable', { cause: err });
      }
      const currentUrl = new URL(callbackUrl(p.id));
      currentUrl.search = checks.query;
      try {
        const tokens = await oidc.authorizationCodeGrant(config, currentUrl, {
          pkceCodeVerifier: checks.codeVerifier,
          expectedState: checks.state,
          ...(p.type === 'oidc' ? { expectedNonce: checks.nonce ?? undefined, idTokenExpected: true } : {}),
        });
        return p.type === 'github' ? await githubProfile(p, config, tokens.access_token) : await oidcProfile(config, tokens);
      } catch (err) {
        throw failureOf(err);
      }
    },

    start() {
      if (!stopped) return;
      stopped = false;
      for (const p of providers) {
        const d = discoveries.get(p.id);
        if (d !== undefined && d.config === undefined && d.inFlight === undefined) discover(p, d).catch(() => undefined);
      }
    },

    stop() {
      stopped = true;
      for (const d of discoveries.values()) {
        clearTimeout(d.timer);
        d.timer = undefined;
      }
    },
  };
}
