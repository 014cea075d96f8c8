/**
 * @latchkey/verify: checks Latchkey access tokens in a resource server (docs/api.md#access-token,
 * docs/integration.md). RS256 is pinned (RFC 8725 §3.1), keys come only from the configured JWKS
 * URL (RFC 7517) by `kid`, and the token must be an RFC 9068 access token (`typ: at+jwt`) of the
 * configured issuer and audience. Optionally, the service is asked whether the session is still
 * active (`GET /auth/v0/me`), since a signature cannot show a revocation. `verifyWebhook` checks
 * the service's webhook requests (Standard Webhooks signatures).
 */
import { createRemoteJWKSet, customFetch, errors, jwtVerify, type JWTPayload } from 'jose';
import { VerifyError, type VerifyErrorCode } from './errors.js';
import { SessionChecker, type SessionCheckOptions } from './session-check.js';

export { assuranceLevel, type AssuranceLevel } from './assurance.js';
export { errorBodyOf, VerifyError, type ErrorBody, type VerifyErrorCode } from './errors.js';
export {
  DEFAULT_WEBHOOK_TOLERANCE_SECONDS,
  verifyWebhook,
  WebhookVerifyError,
  type VerifiedWebhook,
  type VerifyWebhookOptions,
  type WebhookEvent,
  type WebhookHeaders,
  type WebhookVerifyErrorCode,
} from './webhook.js';

export type { SessionCheckOptions } from './session-check.js';

/** The claims of a Latchkey access token (docs/api.md#access-token). */
export interface AccessTokenClaims extends JWTPayload {
  sub: string;
  sid: string;
  iss: string;
  exp: number;
  iat: number;
  jti: string;
  /** Authentication methods (RFC 8176), unchecked: read them with `assuranceLevel`, or `VerifiedToken.amr`. */
  amr?: unknown;
}

/** What `verify` resolves to for a token it accepts. */
export interface VerifiedToken {
  /** The user's id (`sub`). */
  readonly userId: string;
  /** The session's id (`sid`), the `session_id` of sign-in, refresh and me. */
  readonly sessionId: string;
  /** Authentication methods (RFC 8176 `amr`) when the token carries them, else an empty list. */
  readonly amr: readonly string[];
  /** Every claim of the token, verified. */
  readonly claims: AccessTokenClaims;
}

export interface VerifierOptions {
  /** The service's JWKS, `https://auth.example.com/auth/v0/.well-known/jwks.json` (docs/api.md#jwks). */
  jwksUrl: string | URL;
  /** The service's `JWT_ISSUER` (default there: `latchkey`). */
  issuer: string;
  /** The service's `JWT_AUDIENCE` (default there: `latchkey`). */
  audience: string;
  /** Also ask the service whether the session is active, cached per token for `cacheSeconds`. */
  checkSession?: SessionCheckOptions;
  /** Seconds of clock skew allowed on `exp` and `nbf`, as the service allows (default 5). */
  clockToleranceSeconds?: number;
  /**
   * Shortest time between two JWKS fetches caused by an unknown `kid`, in seconds (default 30):
   * a new key after a rotation is picked up at the first token that names it, and junk tokens
   * with made-up `kid`s cost at most one fetch per period.
   */
  jwksCooldownSeconds?: number;
  /** The fetch to use (default: the global fetch). */
  fetch?: typeof fetch;
}

export interface Verifier {
  /**
   * Verifies an access token. Resolves to its user, session and claims; rejects with a
   * `VerifyError` (never another error) saying why it is refused.
   */
  verify(token: string | undefined): Promise<VerifiedToken>;
  /** Takes the token from an `Authorization: Bearer` header value (RFC 6750 §2.1) and verifies it. */
  verifyAuthorization(header: string | undefined): Promise<VerifiedToken>;
}

/** The only signature algorithm of Latchkey access tokens; never taken from the token (RFC 8725 §3.1). */
const ALGORITHMS = ['RS256'];
/** The service allows 5 s of skew on `exp` and `nbf` (docs/api.md#access-token). */
const DEFAULT_CLOCK_TOLERANCE_SECONDS = 5;
/** The JWKS answer's `Cache-Control: max-age=300` (docs/api.md#jwks): a retired key drops out within it. */
const JWKS_CACHE_MAX_AGE_MS = 300_000;
/** jose's default cooldown between JWKS refetches for an unknown `kid`. */
const DEFAULT_JWKS_COOLDOWN_SECONDS = 30;
/** A JWKS fetch that takes longer than this fails (the request answers 503). */
const JWKS_TIMEOUT_MS = 5_000;
/** Claims every Latchkey access token carries (docs/api.md#access-token). */
const REQUIRED_CLAIMS = ['sub', 'sid', 'iat', 'exp', 'jti'];
/** RFC 6750 §2.1: `Bearer` (any case), one or more spaces, a b64token. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;

/**
 * Builds a verifier. Keys are fetched lazily from `jwksUrl` through jose's `createRemoteJWKSet`,
 * kept for 300 s, and refetched at once (at most once per `jwksCooldownSeconds`) when a token
 * names a `kid` the cached set lacks, as after a key rotation (docs/key-rotation.md). Create one
 * verifier per process, not per request.
 */
export function createVerifier(options: VerifierOptions): Verifier {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const jwks = createRemoteJWKSet(new URL(options.jwksUrl), {
    cacheMaxAge: JWKS_CACHE_MAX_AGE_MS,
    cooldownDuration: (options.jwksCooldownSeconds ?? DEFAULT_JWKS_COOLDOWN_SECONDS) * 1000,
    timeoutDuration: JWKS_TIMEOUT_MS,
    ...(options.fetch === undefined ? {} : { [customFetch]: options.fetch as never }),
  });
  const sessions = options.checkSession === undefined ? undefined : new SessionChecker(options.checkSession, fetchImpl);

  async function verify(token: string | undefined): Promise<VerifiedToken> {
    if (token === undefined || token === '') throw new VerifyError('missing_token', 'An access token is required.');
    let claims: AccessTokenClaims;
    try {
      const { payload } = await jwtVerify(token, jwks, {
        algorithms: ALGORITHMS,
        issuer: options.issuer,
        audience: options.audience,
        typ: 'at+jwt',
        clockTolerance: options.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS,
        requiredClaims: REQUIRED_CLAIMS,
      });
      claims = payload as AccessTokenClaims;
    } catch (err) {
      throw refusal(err);
    }
    if (typeof claims.sub !== 'string' || typeof claims.sid !== 'string' || typeof claims.jti !== 'string') {
      throw new VerifyError('invalid_claims', 'The token lacks a user, session or token id.');
    }
    if (sessions !== undefined && !(await sessions.isActive(token, claims))) {
      throw new VerifyError('session_inactive', 'The session of this token has ended.');
    }
    const amr = Array.isArray(claims.amr) && claims.amr.every((m) => typeof m === 'string') ? (claims.amr as string[]) : [];
    return { userId: claims.sub, sessionId: claims.sid, amr, claims };
  }

  return {
    verify,
    verifyAuthorization(header) {
      if (header === undefined || header.trim() === '') return verify(undefined);
      const match = BEARER.exec(header);
      if (match === null) return Promise.reject(new VerifyError('malformed', 'The Authorization header is not a Bearer token.'));
      return verify(match[1]);
    },
  };
}

/** Maps an error of jose's `jwtVerify` (or of the JWKS fetch) to a `VerifyError`. */
function refusal(err: unknown): VerifyError {
  const why = (code: VerifyErrorCode, message: string) => new VerifyError(code, message, { cause: err });
  if (err instanceof errors.JOSEAlgNotAllowed) return why('algorithm_not_allowed', 'The token is not signed with RS256.');
  if (err instanceof errors.JWTExpired) return why('expired', 'The token has expired.');
  if (err instanceof errors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case 'iss':
        return why('invalid_issuer', 'The token was issued by another issuer.');
      case 'aud':
        return why('invalid_audience', 'The token is meant for another audience.');
      case 'typ':
        return why('invalid_type', 'The token is not an access token (typ at+jwt).');
      case 'nbf':
        return why('not_yet_valid', 'The token is not valid yet.');
      default:
        return why('invalid_claims', `The token's ${err.claim} claim is invalid.`);
    }
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return why('invalid_signature', 'The token signature is invalid.');
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) return why('unknown_key', 'The token names no key of the JWKS.');
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid || err instanceof errors.JOSENotSupported) return why('malformed', 'The token is malformed.');
  // JWKSTimeout, JWKSInvalid, a failed fetch: the keys could not be had.
  return why('unavailable', 'The signing keys could not be fetched.');
}
