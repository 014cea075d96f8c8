import { randomUUID } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT, type JWTHeaderParameters } from 'jose';
import type { Clock } from '../../clock.js';
import type { KeyStore } from '../keys/keys.service.js';

/** JWT `typ` header of access tokens (RFC 9068 §2.1). */
export const ACCESS_TOKEN_TYP = 'at+jwt';
/** Leeway for `exp`/`nbf`/`iat` checks in seconds: "at most a few seconds" (decisions.md §4). */
export const CLOCK_TOLERANCE_SECONDS = 5;
/** RFC 4122 UUID text form; `sub` and `sid` must match it before they reach SQL. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The claims the service reads back from a verified access token. */
export interface AccessTokenClaims {
  /** User id. */
  readonly sub: string;
  /** Session id (the refresh token family). */
  readonly sid: string;
  readonly jti: string;
  /** Expiry, seconds since the epoch. */
  readonly exp: number;
}

/** Signs and verifies access tokens. */
export interface AccessTokenService {
  /**
   * Issues an RS256 access token (header `typ: at+jwt`, `kid`; claims iss, aud, sub, sid, iat,
   * exp, jti) valid for ACCESS_TOKEN_TTL_SECONDS from the clock's now (decisions.md §4).
   */
  sign(subject: { userId: string; sessionId: string }): Promise<string>;
  /**
   * Verifies signature (RS256 only, key chosen by `kid` among the JWKS keys, never fetched from
   * the token's headers), `typ`, `iss`, `aud`, `exp`/`nbf` with small leeway, and the presence of
   * every claim. RFC 8725 §3.1/§3.11. Does not check the session: the caller must.
   * @returns the claims, or undefined for any invalid token (no reason is exposed).
   */
  verify(token: string): Promise<AccessTokenClaims | undefined>;
}

/** Options for {@link createAccessTokenService}. */
export interface AccessTokenOptions {
  readonly keys: KeyStore;
  readonly issuer: string;
  readonly audience: string;
  /** Lifetime in seconds. */
  readonly ttlSeconds: number;
  readonly clock: Clock;
}

/** Builds the {@link AccessTokenService} over the key store; the JWT header is prepared once. */
export function createAccessTokenService(options: AccessTokenOptions): AccessTokenService {
  const { keys, issuer, audience, ttlSeconds, clock } = options;
  const header: JWTHeaderParameters = { alg: 'RS256', typ: ACCESS_TOKEN_TYP, kid: keys.signing.kid };
  const getKey = (protectedHeader: JWTHeaderParameters) => {
    const found = protectedHeader.kid === undefined ? undefined : keys.verification.get(protectedHeader.kid);
    if (found === undefined) throw new joseErrors.JWKSNoMatchingKey();
    return found.key;
  };
  return {
    async sign({ userId, sessionId }) {
      const iat = Math.floor(clock.now().getTime() / 1000);
      return new SignJWT({ sid: sessionId })
        .setProtectedHeader(header)
        .setIssuer(issuer)
        .setAudience(audience)
        .setSubject(userId)
        .setIssuedAt(iat)
        .setExpirationTime(iat + ttlSeconds)
        .setJti(randomUUID())
        .sign(keys.signing.privateKey);
    },
    async verify(token) {
      try {
        const { payload } = await jwtVerify(token, getKey, {
          algorithms: ['RS256'],
          typ: ACCESS_TOKEN_TYP,
          issuer,
          audience,
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
          currentDate: clock.now(),
          requiredClaims: ['iss', 'aud', 'sub', 'sid', 'iat', 'exp', 'jti'],
        });
        const { sub, sid, jti, exp } = payload;
        if (typeof sub !== 'string' || !UUID_PATTERN.test(sub)) return undefined;
        if (typeof sid !== 'string' || !UUID_PATTERN.test(sid)) return undefined;
        if (typeof jti !== 'string' || typeof exp !== 'number') return undefined;
        return { sub, sid, jti, exp };
      } catch {
        return undefined;
      }
    },
  };
}
