import { randomUUID, sign as rsaSign, verify as rsaVerify, type KeyObject } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { KeyStore } from '../keys/keys.service.js';
import { decodeCanonicalBase64url } from '../../crypto/secrets.js';

/** JWT `typ` header of access tokens (RFC 9068 §2.1). */
export const ACCESS_TOKEN_TYP = 'at+jwt';
/** Leeway for `exp`/`nbf`/`iat` checks in seconds: "at most a few seconds" (docs/api.md#access-token). */
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
   * Issues an RS256 access token (header `typ: at+jwt`, `kid`; claims iss, aud, sub, sid, amr,
   * iat, exp, jti) valid for ACCESS_TOKEN_TTL_SECONDS from the clock's now (docs/api.md#access-token).
   * @param subject.amr the session's authentication methods (RFC 8176: `pwd`, `otp`, `hwk`, `user`).
   */
  sign(subject: { userId: string; sessionId: string; amr: readonly string[] }): Promise<string>;
  /**
   * Verifies signature (RS256 only, key chosen by `kid` among the JWKS keys, never fetched from
   * the token's headers), `typ`, `iss`, `aud`, `exp`/`nbf` with small leeway, and the presence of
   * every claim. RFC 8725 §3.1/§3.11. Does not check the session: the caller must.
   * @returns the claims, or undefined for any invalid token (no reason is exposed).
   */
  verify(token: string): Promise<AccessTokenClaims | undefined>;
  /**
   * The verified-token cache so far: `entries` held now (expired ones included until they are
   * presented again or make room), `hits` (tokens found in it, then accepted or refused for
   * `exp`/`nbf`) and `verifications` (tokens verified in full, whatever the outcome) since the
   * service was built; `hits + verifications` is every token presented.
   */
  cacheStats(): { readonly entries: number; readonly hits: number; readonly verifications: number };
}

/** Options for {@link createAccessTokenService}. */
export interface AccessTokenOptions {
  readonly keys: KeyStore;
  readonly issuer: string;
  readonly audience: string;
  /** Lifetime in seconds. */
  readonly ttlSeconds: number;
  readonly clock: Clock;
  /**
   * Most verified tokens kept by {@link createAccessTokenService}'s cache (ACCESS_TOKEN_CACHE_SIZE,
   * docs/performance.md); 0 turns the cache off. Default {@link DEFAULT_ACCESS_TOKEN_CACHE_SIZE}.
   */
  readonly cacheSize?: number;
}

/** Verified tokens kept by default: about 11 MiB at most (1.2 KB each) (docs/performance.md). */
export const DEFAULT_ACCESS_TOKEN_CACHE_SIZE = 10_000;

/** A verified token as the cache keeps it: what `verify` answers, and what must still hold to answer it again. */
interface VerifiedToken {
  readonly claims: AccessTokenClaims;
  /** The verification key that checked the signature, and its `kid`: a hit needs it still there. */
  readonly kid: string;
  readonly key: KeyObject;
  /** `nbf`, seconds since the epoch, if the token has one. */
  readonly nbf: number | undefined;
}

/** Claims every access token carries (docs/api.md#access-token); a token without one of them is refused. */
const REQUIRED_CLAIMS = ['iss', 'aud', 'sub', 'sid', 'iat', 'exp', 'jti'] as const;
/** The JWS algorithm of access tokens, fixed by the verifier, never taken from the token (RFC 8725 §3.1). */
const JWS_ALG = 'RS256';
/** RS256 is RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3), node:crypto's default padding for RSA keys. */
const RS256_DIGEST = 'sha256';

function base64urlJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/** The JSON object a decoded base64url segment holds, or undefined (not JSON, or not an object). */
function decodeJsonObject(bytes: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(bytes.toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** RSASSA-PKCS1-v1_5 with SHA-256 of `data` (RFC 7518 §3.3), computed on libuv's thread pool. */
function signOnThreadPool(data: Buffer, privateKey: KeyObject): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    rsaSign(RS256_DIGEST, data, privateKey, (err, signature) => (err === null ? resolve(signature) : reject(err)));
  });
}

/** Whether a token expiring at `exp` and valid from `nbf` (if set), in seconds, is valid at `now`, with {@link CLOCK_TOLERANCE_SECONDS} of leeway. */
function timely(exp: number, nbf: number | undefined, now: number): boolean {
  return exp > now - CLOCK_TOLERANCE_SECONDS && (nbf === undefined || nbf <= now + CLOCK_TOLERANCE_SECONDS);
}

/** `typ` compared as media types are: case-insensitively, `application/` optional (RFC 7515 §4.1.9). */
function normalizeTyp(typ: string): string {
  return typ.toLowerCase().replace(/^application\//, '');
}

/**
 * Builds the {@link AccessTokenService} over the key store; the JWT header is prepared once.
 *
 * RS256 with node:crypto rather than jose (docs/performance.md). Verification is synchronous on
 * the calling thread: an RSA-2048 verification takes about 25 µs, less than handing it to
 * libuv's thread pool and back (what WebCrypto, and so jose, does). Signing takes about 0.3 ms
 * of CPU and runs on libuv's thread pool (node:crypto's callback form), so the event loop, the
 * service's one serial resource, goes on with other requests meanwhile. The checks are those of
 * RFC 8725 §3.1 and §3.11 and RFC 9068 §4, as jose's
 * `jwtVerify` made them (same leeway, same claim rules), plus: no `crit` header is accepted (no
 * extension is understood) and every segment must be canonical base64url.
 *
 * Verified tokens are kept in a bounded cache keyed by the whole token text, so that a token
 * presented again (a client sends the same one with every request of its lifetime) is answered
 * without the RS256 verification and the decoding, a quarter of the event loop's time per `/me`
 * (docs/performance.md); the API gateways that verify JWTs do the same (Envoy's
 * `jwt_authn` cache). Only tokens that passed every check enter it; a hit checks again what can
 * change: `exp` and `nbf` against the clock, and that the verification key is still one of ours.
 * The session check that follows is never cached. When full, the oldest entry makes room.
 */
export function createAccessTokenService(options: AccessTokenOptions): AccessTokenService {
  const { keys, issuer, audience, ttlSeconds, clock, cacheSize = DEFAULT_ACCESS_TOKEN_CACHE_SIZE } = options;
  /** Verified tokens by their whole text, oldest first. */
  const verified = new Map<string, VerifiedToken>();
  let hits = 0;
  let verifications = 0;
  const encodedHeader = base64urlJson({ alg: JWS_ALG, typ: ACCESS_TOKEN_TYP, kid: keys.signing.kid });
  return {
    async sign({ userId, sessionId, amr }) {
      const iat = Math.floor(clock.now().getTime() / 1000);
      const payload = { sid: sessionId, iss: issuer, aud: audience, sub: userId, amr, iat, exp: iat + ttlSeconds, jti: randomUUID() };
      const signingInput = `${encodedHeader}.${base64urlJson(payload)}`;
      const signature = await signOnThreadPool(Buffer.from(signingInput, 'ascii'), keys.signing.privateKey);
      return `${signingInput}.${signature.toString('base64url')}`;
    },
    async verify(token) {
      const now = Math.floor(clock.now().getTime() / 1000);
      const cached = verified.get(token);
      if (cached !== undefined) {
        if (keys.verification.get(cached.kid)?.key === cached.key) {
          hits++;
          if (!timely(cached.claims.exp, cached.nbf, now)) {
            verified.delete(token);
            return undefined;
          }
          return cached.claims;
        }
        // The key was retired meanwhile: verify again (against what is published now).
        verified.delete(token);
      }
      verifications++;
      const segments = token.split('.');
      if (segments.length !== 3) return undefined;
      const [encodedProtected, encodedPayload, encodedSignature] = segments as [string, string, string];
      // Each segment must be canonical base64url (RFC 7515 §2): a token has one spelling only.
      const protectedBytes = decodeCanonicalBase64url(encodedProtected);
      const payloadBytes = decodeCanonicalBase64url(encodedPayload);
      const signature = decodeCanonicalBase64url(encodedSignature);
      if (protectedBytes === undefined || payloadBytes === undefined || signature === undefined) return undefined;
      const header = decodeJsonObject(protectedBytes);
      if (header === undefined || header.alg !== JWS_ALG || header.crit !== undefined) return undefined;
      if (typeof header.typ !== 'string' || normalizeTyp(header.typ) !== ACCESS_TOKEN_TYP) return undefined;
      // The key is chosen by `kid` among our own keys only, never fetched or taken from the token.
      const kid = header.kid;
      if (typeof kid !== 'string') return undefined;
      const key = keys.verification.get(kid);
      if (key === undefined) return undefined;
      let signatureOk: boolean;
      try {
        signatureOk = rsaVerify(RS256_DIGEST, Buffer.from(`${encodedProtected}.${encodedPayload}`, 'ascii'), key.key, signature);
      } catch {
        return undefined;
      }
      if (!signatureOk) return undefined;

      const payload = decodeJsonObject(payloadBytes);
      if (payload === undefined || REQUIRED_CLAIMS.some((claim) => !(claim in payload))) return undefined;
      const { iss, aud, sub, sid, iat, exp, nbf, jti } = payload;
      if (iss !== issuer || !(aud === audience || (Array.isArray(aud) && aud.includes(audience)))) return undefined;
      if (typeof iat !== 'number' || typeof exp !== 'number' || (nbf !== undefined && typeof nbf !== 'number')) return undefined;
      if (!timely(exp, nbf, now)) return undefined;
      if (typeof sub !== 'string' || !UUID_PATTERN.test(sub)) return undefined;
      if (typeof sid !== 'string' || !UUID_PATTERN.test(sid)) return undefined;
      if (typeof jti !== 'string') return undefined;
      const claims: AccessTokenClaims = Object.freeze({ sub, sid, jti, exp });
      if (cacheSize > 0) {
        // Full: the oldest entry (a Map iterates in insertion order) makes room.
        if (verified.size >= cacheSize) verified.delete(verified.keys().next().value as string);
        // A copy of the text: `token` can be a slice of its whole Authorization header, which
        // V8 would keep alive with it (a header padded to 16 KB would then cost 16 KB an entry).
        verified.set(Buffer.from(token, 'latin1').toString('latin1'), { claims, kid, key: key.key, nbf });
      }
      return claims;
    },
    cacheStats: () => ({ entries: verified.size, hits, verifications }),
  };
}
