import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { AppError } from '../../errors.js';
import type { AuthMetrics } from '../../metrics.js';
import { newRefreshToken } from '../../crypto/refresh-token.js';
import { securityEvent } from '../audit/security-events.js';
import { UUID_PATTERN, type AccessTokenService } from '../tokens/access-token.service.js';
import type { UserRow } from '../users/users.shared.js';
import { createRefresh } from './refresh.js';
import type { ClientContext } from '../../plugins/client-context.js';
import type { IssuedTokens } from './issued-tokens.js';
import {
  createSignInSession,
  findActiveSessionWithUser,
  findSessionOwner,
  listActiveSessions,
  revokeAllSessions,
  revokeSession,
  sessionSignedInSince,
  touchSession,
  type SessionRow,
} from './sessions.repo.js';
import { newTimeOrderedId } from '../../crypto/ids.js';

/** The sign-in and refresh result (issued-tokens.ts), part of this service's interface. */
export type { IssuedTokens } from './issued-tokens.js';

/** Longest `User-Agent` kept on a session (and in an event). */
const MAX_USER_AGENT_LENGTH = 512;

/** `client` with its `User-Agent` cut to what is stored. */
function storedClient(client: ClientContext): ClientContext {
  return { ip: client.ip, userAgent: client.userAgent === null ? null : client.userAgent.slice(0, MAX_USER_AGENT_LENGTH) };
}

/** The caller of a Bearer request, after the session check. */
export interface Authenticated {
  readonly user: UserRow;
  /** The session the access token names (its `sid`), checked active. */
  readonly session: { readonly id: string };
}

/** Dependencies of {@link createSessionsService}. */
export interface SessionsDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly accessTokens: AccessTokenService;
  readonly sessionTtlSeconds: number;
  /** `REFRESH_REUSE_GRACE_SECONDS` (0 to 300): 0 is the strict reuse rule (docs/api.md#reuse-grace-window). */
  readonly refreshReuseGraceSeconds: number;
  readonly log: FastifyBaseLogger;
  /** Counts refresh outcomes and revoked sessions. */
  readonly metrics: AuthMetrics;
  /** REAUTH_MAX_AGE_SECONDS: how recent a session's sign-in must be for {@link SessionsService.requireRecentSignIn}. */
  readonly reauthMaxAgeSeconds: number;
}

/**
 * Sessions (docs/api.md#operations): their creation at the end of a sign-in, refresh-token
 * rotation, Bearer authentication, listing and revocation.
 */
export interface SessionsService {
  /**
   * Creates the records of a sign-in whose every check passed (sign-in.service.ts,
   * `finishSignIn`): a device, the session with `amr` (the refresh token family) and its first
   * refresh token, in one statement that creates nothing unless the user's `password_version`
   * is still `checkedPasswordVersion` and no ban is in force, and signs its access token
   * meanwhile. `forgiveKeys`: rate-limit counts (as RateLimiter.judge returned them) the same
   * statement takes back, only when it creates the session. The statement runs on its own,
   * not in BEGIN/COMMIT: delivered late by a silent network after its request answered 503, it
   * leaves a session whose refresh token nobody received, which expires unused (docs/decisions.md).
   * @returns the tokens, or undefined when nothing was created (the password changed, or a ban).
   */
  createSession(userId: string, c: { checkedPasswordVersion: number; amr: readonly string[]; client: ClientContext; forgiveKeys: readonly string[] }): Promise<IssuedTokens | undefined>;
  /**
   * Requires that the caller's session signed in (by any method) at most `reauthMaxAgeSeconds`
   * ago (docs/api.md#recent-sign-in): the session's creation is its sign-in, which refreshes do
   * not move. One indexed read.
   * @throws AppError `auth.reauthentication_required` (401).
   */
  requireRecentSignIn(caller: Authenticated): Promise<void>;
  /**
   * Rotates a refresh token (docs/api.md#refresh-token-rotation): locks its row and session, rejects a revoked or
   * expired session, marks the token rotated and inserts its successor, atomically (one
   * statement when the token is live, `rotateLiveRefreshToken`, else one transaction; refresh.ts),
   * then signs an access token. A rotated token presented again is reuse: the session is revoked
   * (that revocation commits), a warning is logged, and the call fails. Exception, with
   * `refreshReuseGraceSeconds` > 0: the immediate parent of the live token, presented within
   * that many seconds of its rotation, gets the same live token back (see refresh-grace.ts);
   * no second live token is ever created. Reuse records the `refresh_token.reuse_detected`
   * event with `client` (docs/api.md#event-types).
   * @throws AppError `auth.missing_refresh_token`, `auth.invalid_refresh_token`, `auth.refresh_token_reused` (401).
   */
  refresh(refreshToken: string | undefined, client: ClientContext): Promise<IssuedTokens>;
  /**
   * Checks a Bearer access token (docs/api.md#bearer-authentication): signature and claims, then the session row,
   * which must exist, belong to `sub`, and be unrevoked and unexpired. Updates `last_used_at`
   * at most once a minute.
   * @throws AppError `auth.missing_access_token`, `auth.invalid_access_token` (401).
   */
  authenticate(authorization: string | undefined): Promise<Authenticated>;
  /**
   * Revokes the caller's current session (logout). Idempotent. Logs the `session.revoked`
   * security event with `client`'s address.
   */
  logout(auth: Authenticated, client: ClientContext): Promise<void>;
  /** Active sessions of the caller, oldest first. */
  list(auth: Authenticated): Promise<SessionRow[]>;
  /**
   * Revokes every session of the caller; logs `session.revoked` (reason `revoke_all`, with the count).
   * @returns how many sessions this call revoked.
   */
  revokeAll(auth: Authenticated, client: ClientContext): Promise<number>;
  /**
   * Revokes one session of the caller; an already revoked one answers success. Logs `session.revoked`.
   * @throws AppError `auth.session_not_found` (404; also for a non-UUID id), `auth.session_forbidden` (403).
   */
  revokeOne(auth: Authenticated, sessionId: string, client: ClientContext): Promise<void>;
}

/** `Authorization: Bearer <token>` (RFC 6750 §2.1; the scheme is case-insensitive). */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** Builds the {@link SessionsService}: session creation, rotation, Bearer checks and session management. */
export function createSessionsService(deps: SessionsDeps): SessionsService {
  const { db, clock, accessTokens, sessionTtlSeconds, log, metrics } = deps;

  const refresh = createRefresh({ db, clock, accessTokens, refreshReuseGraceSeconds: deps.refreshReuseGraceSeconds, log, metrics });

  return {
    async requireRecentSignIn(caller) {
      const since = new Date(clock.now().getTime() - deps.reauthMaxAgeSeconds * 1000);
      if (!(await sessionSignedInSince(db, caller.session.id, since))) throw new AppError('auth.reauthentication_required');
    },

    async createSession(userId, { checkedPasswordVersion, amr, client, forgiveKeys }) {
      const now = clock.now();
      const sessionId = newTimeOrderedId();
      const refreshToken = newRefreshToken();
      // The access token is signed (on libuv's thread pool) while the statement runs.
      const signing = accessTokens.sign({ userId, sessionId, amr });
      signing.catch(() => undefined); // awaited below; never an unhandled rejection meanwhile
      const created = await createSignInSession(db, {
        sessionId,
        deviceId: newTimeOrderedId(),
        userId,
        checkedPasswordVersion,
        ip: client.ip,
        userAgent: storedClient(client).userAgent,
        now,
        expiresAt: new Date(now.getTime() + sessionTtlSeconds * 1000),
        refreshToken: { id: refreshToken.id, tokenHash: refreshToken.tokenHash },
        forgiveRateLimitKeys: forgiveKeys,
        amr,
      });
      if (!created) return undefined;
      return { sessionId, accessToken: await signing, refreshToken: refreshToken.token, refreshMaxAgeSeconds: sessionTtlSeconds };
    },

    refresh(presented, client) {
      return refresh(presented, storedClient(client));
    },

    async authenticate(authorization) {
      if (authorization === undefined || authorization.trim() === '') throw new AppError('auth.missing_access_token');
      const token = BEARER.exec(authorization)?.[1];
      if (token === undefined) throw new AppError('auth.invalid_access_token');
      const claims = await accessTokens.verify(token);
      if (claims === undefined) throw new AppError('auth.invalid_access_token');
      const now = clock.now();
      const found = await findActiveSessionWithUser(db, claims.sid, claims.sub, now);
      if (found === undefined) throw new AppError('auth.invalid_access_token');
      if (found.lastUseStale) await touchSession(db, found.sessionId, now);
      return { user: found.user, session: { id: found.sessionId } };
    },

    async logout(auth, client) {
      if (await revokeSession(db, auth.session.id, 'logout', clock.now())) metrics.sessionsRevoked('logout');
      securityEvent(log, 'session.revoked', { userId: auth.user.id, sessionId: auth.session.id, ip: client.ip, reason: 'logout' });
    },

    async list(auth) {
      return listActiveSessions(db, auth.user.id, clock.now());
    },

    async revokeAll(auth, client) {
      const count = await revokeAllSessions(db, auth.user.id, 'revoke_all', clock.now());
      metrics.sessionsRevoked('revoke_all', count);
      securityEvent(log, 'session.revoked', { userId: auth.user.id, sessionId: auth.session.id, ip: client.ip, reason: 'revoke_all', count });
      return count;
    },

    async revokeOne(auth, sessionId, client) {
      if (!UUID_PATTERN.test(sessionId)) throw new AppError('auth.session_not_found');
      const owner = await findSessionOwner(db, sessionId);
      if (owner === undefined) throw new AppError('auth.session_not_found');
      if (owner !== auth.user.id) throw new AppError('auth.session_forbidden');
      if (await revokeSession(db, sessionId, 'revoked_by_user', clock.now())) metrics.sessionsRevoked('revoked_by_user');
      securityEvent(log, 'session.revoked', { userId: auth.user.id, sessionId, ip: client.ip, reason: 'revoked_by_user' });
    },
  };
}
