import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { AppError } from '../../errors.js';
import type { PasswordHasher } from '../../crypto/password.js';
import { newRefreshToken, sha256 } from '../../crypto/secrets.js';
import { UUID_PATTERN, type AccessTokenService } from '../tokens/access-token.service.js';
import { normalizeEmail, normalizePhone, normalizeUsername } from '../users/identifiers.js';
import { findUsersByIdentifiers, lockUnchangedPassword, type UserRow } from '../users/users.repo.js';
import { insertRefreshToken, lockRefreshToken, markRotated } from './refresh-tokens.repo.js';
import {
  findActiveSessionWithUser,
  findSessionOwner,
  insertDeviceAndSession,
  LAST_USED_RESOLUTION_SECONDS,
  listActiveSessions,
  revokeAllSessions,
  revokeSession,
  touchSession,
  type SessionRow,
} from './sessions.repo.js';

/** A refresh token as issued: 32 random bytes in base64url, 43 characters. Anything else is not ours. */
const REFRESH_TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/;
/** Stored username form (spec §2 User). */
const STORED_USERNAME = /^[a-z0-9_]{3,32}$/;
/** Longest `User-Agent` kept on a session. */
const MAX_USER_AGENT_LENGTH = 512;

/** Where a request comes from; recorded on the device and session. */
export interface ClientContext {
  readonly ip: string | null;
  readonly userAgent: string | null;
}

/** A sign-in or refresh result: what the route answers plus the refresh token for the cookie. */
export interface IssuedTokens {
  readonly user?: UserRow;
  readonly sessionId: string;
  readonly accessToken: string;
  readonly refreshToken: string;
  /** Seconds until the session (and so the refresh token and cookie) expires. */
  readonly refreshMaxAgeSeconds: number;
}

/** The caller of a Bearer request, after the session check. */
export interface Authenticated {
  readonly user: UserRow;
  readonly session: SessionRow;
}

/** Dependencies of {@link createSessionsService}. */
export interface SessionsDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly hasher: PasswordHasher;
  readonly accessTokens: AccessTokenService;
  readonly sessionTtlSeconds: number;
  readonly log: FastifyBaseLogger;
}

/** Sign-in, refresh-token rotation, Bearer authentication and session management. */
export interface SessionsService {
  /**
   * Signs a user in: every given identifier must name the same user (decisions.md §5); unknown
   * users cost the same argon2id verification as known ones. Creates a device, a session (the
   * refresh token family) and its first refresh token in one transaction.
   * @throws AppError `auth.invalid_credentials` (401), `auth.email_not_verified` (403, only
   *   after the password was right, so it reveals nothing to a guesser).
   */
  signIn(input: { username?: string; email?: string; phone?: string; password: string }, client: ClientContext): Promise<IssuedTokens & { user: UserRow }>;
  /**
   * Rotates a refresh token (decisions.md §5): locks its row and session, rejects a revoked or
   * expired session, marks the token rotated, inserts its successor and signs an access token,
   * all in one transaction. A rotated token presented again is reuse: the session is revoked
   * (that revocation commits), a warning is logged, and the call fails.
   * @throws AppError `auth.missing_refresh_token`, `auth.invalid_refresh_token`, `auth.refresh_token_reused` (401).
   */
  refresh(refreshToken: string | undefined): Promise<IssuedTokens>;
  /**
   * Checks a Bearer access token (spec §1 rule 3): signature and claims, then the session row,
   * which must exist, belong to `sub`, and be unrevoked and unexpired. Updates `last_used_at`
   * at most once a minute.
   * @throws AppError `auth.missing_access_token`, `auth.invalid_access_token` (401).
   */
  authenticate(authorization: string | undefined): Promise<Authenticated>;
  /** Revokes the caller's current session (logout). Idempotent. */
  logout(auth: Authenticated): Promise<void>;
  /** Active sessions of the caller, oldest first. */
  list(auth: Authenticated): Promise<SessionRow[]>;
  /** Revokes every session of the caller. */
  revokeAll(auth: Authenticated): Promise<void>;
  /**
   * Revokes one session of the caller; an already revoked one answers success.
   * @throws AppError `auth.session_not_found` (404; also for a non-UUID id), `auth.session_forbidden` (403).
   */
  revokeOne(auth: Authenticated, sessionId: string): Promise<void>;
}

/** `Authorization: Bearer <token>` (RFC 6750 §2.1; the scheme is case-insensitive). */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** Builds the {@link SessionsService}: sign-in, rotation, Bearer checks and session management. */
export function createSessionsService(deps: SessionsDeps): SessionsService {
  const { db, clock, hasher, accessTokens, sessionTtlSeconds, log } = deps;

  const secondsUntil = (when: Date, now: Date): number => Math.max(0, Math.floor((when.getTime() - now.getTime()) / 1000));

  return {
    async signIn(input, client) {
      const username = input.username === undefined ? undefined : normalizeUsername(input.username);
      const email = input.email === undefined ? undefined : normalizeEmail(input.email);
      // A phone that cannot be normalised matches nobody; it is still a credentials failure.
      const phone = input.phone === undefined ? undefined : (normalizePhone(input.phone) ?? '');
      // A username outside the stored form names nobody: skip the query, keep the dummy-hash timing.
      const possible = username === undefined || STORED_USERNAME.test(username);
      const candidates = possible ? await findUsersByIdentifiers(db, { username, email, phone }) : [];
      const user =
        candidates.length === 1 &&
        (username === undefined || candidates[0]!.username === username) &&
        (email === undefined || candidates[0]!.email === email) &&
        (phone === undefined || candidates[0]!.phone === phone)
          ? candidates[0]
          : undefined;
      const password = input.password.normalize('NFKC');
      if (user === undefined) {
        await hasher.verifyDummy(password);
        throw new AppError('auth.invalid_credentials');
      }
      if (!(await hasher.verify(user.password_hash, password))) throw new AppError('auth.invalid_credentials');
      if (user.email !== null && !user.is_email_verified) throw new AppError('auth.email_not_verified');

      const now = clock.now();
      const sessionId = randomUUID();
      const refreshToken = newRefreshToken();
      const expiresAt = new Date(now.getTime() + sessionTtlSeconds * 1000);
      const userAgent = client.userAgent === null ? null : client.userAgent.slice(0, MAX_USER_AGENT_LENGTH);
      const created = await db.transaction(async (tx) => {
        if (!(await lockUnchangedPassword(tx, user.id, user.password_hash))) return false;
        await insertDeviceAndSession(tx, { sessionId, deviceId: randomUUID(), userId: user.id, ip: client.ip, userAgent, now, expiresAt });
        await insertRefreshToken(tx, { id: randomUUID(), sessionId, tokenHash: sha256(refreshToken), parentId: null, now });
        return true;
      });
      // The password changed between the check and the session: the old password is no longer valid.
      if (!created) throw new AppError('auth.invalid_credentials');
      const accessToken = await accessTokens.sign({ userId: user.id, sessionId });
      return { user, sessionId, accessToken, refreshToken, refreshMaxAgeSeconds: sessionTtlSeconds };
    },

    async refresh(presented) {
      if (presented === undefined || presented === '') throw new AppError('auth.missing_refresh_token');
      if (!REFRESH_TOKEN_FORMAT.test(presented)) throw new AppError('auth.invalid_refresh_token');
      const now = clock.now();
      const outcome = await db.transaction(async (tx) => {
        const token = await lockRefreshToken(tx, sha256(presented));
        if (token === undefined) return { kind: 'invalid' } as const;
        if (token.rotated_at !== null) {
          await revokeSession(tx, token.session_id, 'refresh_token_reuse', now);
          return { kind: 'reused', sessionId: token.session_id, userId: token.user_id } as const;
        }
        if (token.session_revoked_at !== null || token.session_expires_at <= now) return { kind: 'invalid' } as const;
        await markRotated(tx, token.id, now);
        const refreshToken = newRefreshToken();
        await insertRefreshToken(tx, { id: randomUUID(), sessionId: token.session_id, tokenHash: sha256(refreshToken), parentId: token.id, now });
        await touchSession(tx, token.session_id, now);
        const accessToken = await accessTokens.sign({ userId: token.user_id, sessionId: token.session_id });
        return {
          kind: 'rotated',
          tokens: { sessionId: token.session_id, accessToken, refreshToken, refreshMaxAgeSeconds: secondsUntil(token.session_expires_at, now) },
        } as const;
      });
      switch (outcome.kind) {
        case 'rotated':
          return outcome.tokens;
        case 'reused':
          // Spec §1 rule 4 / §3: reuse is an operational signal. Never log the token itself.
          log.warn({ event: 'refresh_token_reuse', sessionId: outcome.sessionId, userId: outcome.userId }, 'refresh token reuse detected; session revoked');
          throw new AppError('auth.refresh_token_reused');
        case 'invalid':
          throw new AppError('auth.invalid_refresh_token');
      }
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
      const lastUsed = found.session.last_used_at;
      if (lastUsed === null || now.getTime() - lastUsed.getTime() >= LAST_USED_RESOLUTION_SECONDS * 1000) {
        await touchSession(db, found.session.id, now);
      }
      return found;
    },

    async logout(auth) {
      await revokeSession(db, auth.session.id, 'logout', clock.now());
    },

    async list(auth) {
      return listActiveSessions(db, auth.user.id, clock.now());
    },

    async revokeAll(auth) {
      await revokeAllSessions(db, auth.user.id, 'revoke_all', clock.now());
    },

    async revokeOne(auth, sessionId) {
      if (!UUID_PATTERN.test(sessionId)) throw new AppError('auth.session_not_found');
      const owner = await findSessionOwner(db, sessionId);
      if (owner === undefined) throw new AppError('auth.session_not_found');
      if (owner !== auth.user.id) throw new AppError('auth.session_forbidden');
      await revokeSession(db, sessionId, 'revoked_by_user', clock.now());
    },
  };
}
