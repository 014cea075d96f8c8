/**
 * The optional live session check of `createVerifier`: asks the service `GET /auth/v0/me` with
 * the token (docs/api.md#me), which answers 200 only while the session is active
 * (docs/api.md#logout-and-revocation), and caches the answer per token.
 */
import type { JWTPayload } from 'jose';
import { VerifyError } from './errors.js';

export interface SessionCheckOptions {
  /** Where the service is: `https://auth.example.com` (the `/auth/v0/me` path is appended). */
  baseUrl: string | URL;
  /**
   * How long an "active" answer is trusted, in seconds: a revocation is seen at the latest this
   * long after it, at the cost of one call per token per period. 0 asks on every request.
   */
  cacheSeconds: number;
}

/** Most tokens remembered; beyond it the oldest answers are forgotten (and asked again). */
const MAX_CACHED_TOKENS = 10_000;
/** A session check slower than this fails (the request answers 503). */
const SESSION_CHECK_TIMEOUT_MS = 5_000;

interface CachedAnswer {
  /** Resolves to whether the session is active; shared by concurrent checks of one token. */
  readonly active: Promise<boolean>;
  /** Until when (ms since the epoch) the answer is used. */
  until: number;
}

/** Asks the service whether a verified token's session is active, once per token per `cacheSeconds`. */
export class SessionChecker {
  private readonly cache = new Map<string, CachedAnswer>();
  private readonly meUrl: URL;
  private readonly cacheMs: number;

  constructor(
    options: SessionCheckOptions,
    private readonly fetchImpl: typeof fetch,
  ) {
    if (!(options.cacheSeconds >= 0)) throw new RangeError('checkSession.cacheSeconds must be 0 or more');
    this.meUrl = new URL('auth/v0/me', String(options.baseUrl).replace(/\/*$/, '/'));
    this.cacheMs = options.cacheSeconds * 1000;
  }

  /**
   * Whether the session of `token` (already verified, `claims` its payload) is active. An ended
   * session is final (docs/api.md#sessions: revocation is permanent), so that answer is kept
   * until the token expires; "active" is kept for `cacheSeconds`. Concurrent checks of one token
   * share one request. Rejects with `VerifyError('unavailable')` when the service cannot answer
   * (nothing is cached then).
   */
  isActive(token: string, claims: JWTPayload & { jti: string; sub: string; sid: string }): Promise<boolean> {
    const now = Date.now();
    const key = claims.jti;
    const cached = this.cache.get(key);
    if (cached !== undefined && cached.until > now) return cached.active;
    if (this.cache.size >= MAX_CACHED_TOKENS) this.forgetOld(now);
    const entry: CachedAnswer = { active: this.ask(token, claims), until: Number.POSITIVE_INFINITY };
    this.cache.set(key, entry);
    entry.active.then(
      (active) => {
        entry.until = active ? Date.now() + this.cacheMs : (claims.exp ?? 0) * 1000;
      },
      () => this.cache.delete(key),
    );
    return entry.active;
  }

  private async ask(token: string, claims: { sub: string; sid: string }): Promise<boolean> {
    let res: Response;
    try {
      res = await this.fetchImpl(this.meUrl, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(SESSION_CHECK_TIMEOUT_MS) });
    } catch (err) {
      throw new VerifyError('unavailable', 'The session check could not reach the auth service.', { cause: err });
    }
    if (res.status === 401) {
      await res.body?.cancel();
      return false;
    }
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new VerifyError('unavailable', `The session check answered ${res.status}.`);
    }
    const body = (await res.json()) as { user?: { id?: unknown }; session_id?: unknown };
    return body.user?.id === claims.sub && body.session_id === claims.sid;
  }

  /** Drops expired answers, then the oldest ones while the cache is full. */
  private forgetOld(now: number): void {
    for (const [key, entry] of this.cache) if (entry.until <= now) this.cache.delete(key);
    for (const key of this.cache.keys()) {
      if (this.cache.size < MAX_CACHED_TOKENS) break;
      this.cache.delete(key);
    }
  }
}
