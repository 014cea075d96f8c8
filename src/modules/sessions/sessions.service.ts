import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { AppError } from '../../errors.js';
import { createAuthMetrics, type AuthMetrics } from '../../metrics.js';
import type { PasswordHasher } from '../../crypto/password.js';
import { newRefreshToken, sha256 } from '../../crypto/secrets.js';
import { UUID_PATTERN, type AccessTokenService } from '../tokens/access-token.service.js';
import { normalizeEmail, normalizePhone, normalizeUsername } from '../users/identifiers.js';
import { banInForce, findUserBan, upgradePasswordHash, usersByIdentifiersQuery, type SignInUser, type UserRow } from '../users/users.shared.js';
import { HIT_WINDOWS_PARAMS } from '../rate-limits/rate-limits.shared.js';
import { securityEvent } from '../audit/security-events.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import type { AccountWindow, FallbackWindow, RateLimiter, RateLimitVerdict } from '../rate-limits/rate-limits.service.js';
import { clientNetwork } from '../rate-limits/client-network.js';
import { createRefresh } from './refresh.js';
import type { ClientContext } from '../../plugins/client-context.js';
import type { IssuedTokens } from './issued-tokens.js';
import { insertChallenge } from '../mfa/mfa.shared.js';
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

/**
 * The `amr` (RFC 8176) of a session signed in with a password: the `sessions.amr` column's
 * default (migration 007), which its access tokens carry across refreshes.
 */
export const PASSWORD_AMR: readonly string[] = Object.freeze(['pwd']);

/** How long a sign-in challenge of a user with a second factor lives, in seconds (docs/api.md#sign-in-second-step). */
export const MFA_CHALLENGE_TTL_SECONDS = 300;

/**
 * The outcome of a sign-in whose password was right: a session, or, for a user who turned on a
 * second factor, a challenge (the `mfa_challenge` cookie's value) to complete with
 * `POST /sign-in/mfa` (docs/api.md#sign-in-second-step).
 */
export type SignInResult =
  | (IssuedTokens & { readonly kind: 'session'; readonly user: UserRow })
  | { readonly kind: 'mfa_required'; readonly user: UserRow; readonly challenge: string; readonly challengeMaxAgeSeconds: number };

/** Stored username form (docs/api.md#operations User). */
const STORED_USERNAME = /^[a-z0-9_]{3,32}$/;
/** Longest `User-Agent` kept on a session (and in an event). */
const MAX_USER_AGENT_LENGTH = 512;

/** `client` with its `User-Agent` cut to what is stored. */
function storedClient(client: ClientContext): ClientContext {
  return { ip: client.ip, userAgent: client.userAgent === null ? null : client.userAgent.slice(0, MAX_USER_AGENT_LENGTH) };
}

/** The subject under which the failures of identifiers that name no account are counted: the normalised identifiers given, together. */
function unknownAccountSubject(subjects: readonly string[]): string {
  return subjects.join('\n');
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
  readonly hasher: PasswordHasher;
  readonly accessTokens: AccessTokenService;
  readonly sessionTtlSeconds: number;
  /** `REFRESH_REUSE_GRACE_SECONDS` (0 to 300): 0 is the strict reuse rule (docs/api.md#reuse-grace-window). */
  readonly refreshReuseGraceSeconds: number;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'signInPerIdentifier' | 'signInPerIp' | 'signInPerAccount' | 'signInPerUnknownAccount'>;
  readonly log: FastifyBaseLogger;
  /** Counts sign-in and refresh outcomes and revoked sessions; defaults to a registry of its own. */
  readonly metrics?: AuthMetrics;
  /** REAUTH_MAX_AGE_SECONDS: how recent a session's sign-in must be for {@link SessionsService.requireRecentSignIn}. */
  readonly reauthMaxAgeSeconds: number;
}

/** Sign-in, refresh-token rotation, Bearer authentication and session management. */
export interface SessionsService {
  /**
   * Signs a user in: every given identifier must name the same user (docs/api.md#refresh-token-rotation); unknown
   * users cost the same argon2id verification as known ones. Two statements: the attempt's
   * rate-limit counts with the user lookup, then a device, a session (the refresh token family)
   * and its first refresh token with the counts taken back (one statement, on its own rather
   * than in BEGIN/COMMIT, docs/decisions.md). Failed attempts count per client, per identifier
   * from that client and per account (docs/security.md §6).
   * A user with a second factor gets no session: a challenge is stored (300 s, 5 tries) and its
   * cookie value returned instead (`kind: 'mfa_required'`); the password step's counts are
   * taken back as for a success.
   * @throws AppError `auth.invalid_credentials` (401), `auth.user_banned` (403, a ban is in force)
   *   and `auth.email_not_verified` (403), both only after the password was right, so they
   *   reveal nothing to a guesser,
   *   `auth.sign_in.too_many_attempts` (429, Retry-After).
   */
  signIn(input: { username?: string; email?: string; phone?: string; password: string }, client: ClientContext): Promise<SignInResult>;
  /**
   * Creates a session for `user` as a sign-in does (a device, the session with `amr`, its first
   * refresh token, in one statement that creates nothing unless the user's `password_version` is
   * still `checkedPasswordVersion`) and signs its access token: the second step of a sign-in with a second factor,
   * or a passkey sign-in. `forgiveKeys`: rate-limit counts (as RateLimiter.hitAll returned them)
   * the same statement takes back, only when it creates the session.
   * @returns the tokens, or undefined when the password changed since it was checked.
   * @throws AppError `auth.user_banned` (403) when a ban is in force: nothing was created.
   */
  startSession(user: UserRow, c: { checkedPasswordVersion: number; amr: readonly string[]; client: ClientContext; forgiveKeys?: readonly string[] }): Promise<IssuedTokens | undefined>;
  /**
   * The end of every sign-in whose first credential checked out (a password, an identity
   * provider), one function so no way in can go around what the account requires, in this
   * order: a ban in force refuses; an email that is not verified refuses; a second factor gets
   * a challenge (300 s, 5 tries, remembering `amr`) instead of a session; otherwise a session
   * with `amr` is created as {@link startSession} creates one, only while the user's
   * `password_version` is still the one read with `user`. `forgiveKeys`: rate-limit counts taken
   * back on each of these outcomes (a right first credential does not count as a failure).
   * @returns the session or the challenge; undefined when the password changed since `user` was read.
   * @throws AppError `auth.user_banned` (403), `auth.email_not_verified` (403).
   */
  finishSignIn(user: SignInUser, c: { amr: readonly string[]; client: ClientContext; forgiveKeys?: readonly string[] }): Promise<SignInResult | undefined>;
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
  /** Revokes the caller's current session (logout). Idempotent. */
  logout(auth: Authenticated): Promise<void>;
  /** Active sessions of the caller, oldest first. */
  list(auth: Authenticated): Promise<SessionRow[]>;
  /** Revokes every session of the caller. @returns how many sessions this call revoked. */
  revokeAll(auth: Authenticated): Promise<number>;
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
  const { db, clock, hasher, accessTokens, sessionTtlSeconds, limiter, rules, log } = deps;
  const metrics = deps.metrics ?? createAuthMetrics();

  /**
   * Counts a sign-in attempt against the client and then every given identifier from that client
   * (docs/security.md, rate limits), and finds the users the identifiers name with their
   * account's failures of the current hour, in one statement (docs/performance.md). The client
   * first: a source already over its limit does not also count against the identifiers it names.
   * Known and unknown identifiers count alike, so a lock reveals nothing; a right password takes
   * its counts back (in the statement that creates the session, or, when the email is not
   * verified, by `forgiveKeys`), so only failures add up. Counted per client, an identifier's
   * failures from elsewhere never lock its owner out; the account's own limit
   * (`signInPerAccount`, failures counted by {@link countAccountFailure}) bounds what many
   * clients together can try.
   * @returns `user`: the one user every given identifier names, or undefined (docs/decisions.md,
   *   "Identifiers and passwords"); `rateLimitKeys`: the counted keys, to take them back.
   * @throws AppError `auth.sign_in.too_many_attempts` (429) with Retry-After, before any
   *   password is hashed: the client or an identifier from it is over its limit, or the account
   *   has had its most failures this hour.
   */
  const countAttemptAndFindUser = async (
    subjects: readonly string[],
    ip: string | null,
    ids: { username?: string | undefined; email?: string | undefined; phone?: string | undefined },
  ): Promise<{ user: SignInUser | undefined; rateLimitKeys: readonly string[] }> => {
    // A username outside the stored form names nobody: the statement need not look (the caller keeps the dummy-hash timing).
    const impossible = ids.username !== undefined && !STORED_USERNAME.test(ids.username);
    const client = clientNetwork(ip);
    // An identifier that names no account is counted per normalised identifier, under a key of
    // its own whose window the same statement reads: it meets the per-account limit exactly as
    // an account does, so a 429 tells nothing about who exists.
    const unknownSubject = { rule: rules.signInPerUnknownAccount, subject: unknownAccountSubject(subjects) };
    const { verdict, rows: found, keys } = await limiter.hitAll<Partial<SignInUser> & AccountWindow & FallbackWindow>(
      {
        first: ip === null ? undefined : { rule: rules.signInPerIp, subject: ip },
        rule: rules.signInPerIdentifier,
        subjects: subjects.map((subject) => `${subject} from ${client}`),
      },
      limiter.withAccountWindow(rules.signInPerAccount, usersByIdentifiersQuery(HIT_WINDOWS_PARAMS + 1, impossible ? {} : ids), HIT_WINDOWS_PARAMS + 1, unknownSubject),
    );
    const rows = found.filter((row): row is SignInUser & AccountWindow & FallbackWindow => row.id != null);
    const [only] = rows;
    const matches =
      rows.length === 1 &&
      only !== undefined &&
      (ids.username === undefined || only.username === ids.username) &&
      (ids.email === undefined || only.email === ids.email) &&
      (ids.phone === undefined || only.phone === ids.phone);
    const fallback = found[0];
    const accountVerdict: RateLimitVerdict = matches
      ? limiter.accountVerdict(rules.signInPerAccount, only)
      : limiter.accountVerdict(rules.signInPerUnknownAccount, { window_hits: fallback?.fallback_hits ?? null, window_start: fallback?.fallback_window_start ?? null });
    const refused = [verdict, accountVerdict].flatMap((v) => (v.allowed ? [] : [v.retryAfterSeconds]));
    if (refused.length > 0) {
      securityEvent(log, 'sign_in.locked', { ip, ...(accountVerdict.allowed ? {} : { userId: matches ? only.id : undefined, reason: 'account' }) });
      metrics.signIn('locked');
      throw new AppError('auth.sign_in.too_many_attempts', { headers: { 'retry-after': String(Math.max(...refused)) } });
    }
    if (!matches) return { user: undefined, rateLimitKeys: keys };
    const { window_hits: _hits, window_start: _start, fallback_hits: _fh, fallback_window_start: _fs, ...user } = only;
    return { user, rateLimitKeys: keys };
  };
  /**
   * Counts one failed sign-in against the account (NIST SP 800-63B-4 §3.2.2: at most 100
   * failures per account; here per hour, so no one can lock an account for good). Counted after
   * the password was found wrong, so requests in flight together can pass the limit by their
   * number. Identifiers that name no account are counted the same way, per normalised
   * identifier (`signInPerUnknownAccount`, read by {@link countAttemptAndFindUser}): the same
   * write and the same limit, so neither the timing nor the 429 tells who exists (ASVS 5.0
   * V6.3.8).
   */
  const countAccountFailure = (user: UserRow | undefined, subjects: readonly string[]): Promise<unknown> =>
    user === undefined ? limiter.hit(rules.signInPerUnknownAccount, unknownAccountSubject(subjects)) : limiter.hit(rules.signInPerAccount, user.id);

  /**
   * Re-hashes a password whose stored argon2id parameters are below the configured ones (OWASP
   * Password Storage Cheat Sheet: upgrade at the next login). Started once the
   * session (or the second step's challenge) is stored, in the background: the answer does not
   * wait for the second hash. A parallel change wins; the password's version stays.
   */
  const upgradeHashInBackground = (userId: string, expectedHash: string, password: string): void => {
    void (async () => {
      const newHash = await hasher.hash(password);
      if (await upgradePasswordHash(db, userId, { expectedHash, newHash }, clock.now())) {
        log.info({ userId }, 'password hash upgraded to the configured argon2id parameters');
      }
    })().catch((err: unknown) => log.warn({ err, userId }, 'password hash upgrade failed'));
  };

  /** The refusal of a banned user whose credential checked out, logged and counted (docs/api.md, admin API: "Bans"). */
  const refuseBanned = (userId: string, ip: string | null): AppError => {
    securityEvent(log, 'sign_in.failed', { userId, ip, reason: 'banned' });
    metrics.signIn('banned');
    return new AppError('auth.user_banned');
  };
  /**
   * After the statement that creates a session created nothing: throws {@link refuseBanned}'s
   * error when the user is banned now (the statement refuses a banned user), else returns (the
   * password changed). One read, only on this rare path.
   */
  const refuseIfBanned = async (userId: string, ip: string | null): Promise<void> => {
    const now = clock.now();
    const current = await findUserBan(db, userId);
    if (current !== undefined && banInForce(current, now)) throw refuseBanned(userId, ip);
  };

  const refresh = createRefresh({ db, clock, accessTokens, refreshReuseGraceSeconds: deps.refreshReuseGraceSeconds, log, metrics });

  /**
   * A new session for `userId`, ready to be created: its id and first refresh token, its access
   * token already being signed (on libuv's thread pool), and `create`, the one statement
   * ({@link createSignInSession}) that makes the device, the session with `amr` and the refresh
   * token, only while the password is still version `checkedPasswordVersion`, taking back `forgiveKeys`.
   */
  const prepareSession = (userId: string, client: ClientContext, amr: readonly string[]) => {
    const now = clock.now();
    const sessionId = newTimeOrderedId();
    const refreshToken = newRefreshToken();
    const signing = accessTokens.sign({ userId, sessionId, amr });
    signing.catch(() => undefined); // awaited by the caller; never an unhandled rejection meanwhile
    const create = (checkedPasswordVersion: number, forgiveKeys: readonly string[]): Promise<boolean> =>
      createSignInSession(db, {
        sessionId,
        deviceId: newTimeOrderedId(),
        userId,
        checkedPasswordVersion,
        ip: client.ip,
        userAgent: storedClient(client).userAgent,
        now,
        expiresAt: new Date(now.getTime() + sessionTtlSeconds * 1000),
        refreshToken: { id: newTimeOrderedId(), tokenHash: sha256(refreshToken) },
        forgiveRateLimitKeys: forgiveKeys,
        amr,
      });
    return { sessionId, refreshToken, signing, create };
  };

  /** Takes back rate-limit counts, when there are any. */
  const forgive = async (keys: readonly string[]): Promise<void> => {
    if (keys.length > 0) await limiter.forgiveKeys(keys);
  };

  /** {@link SessionsService.finishSignIn}. */
  const finishSignIn = async (
    user: SignInUser,
    c: { amr: readonly string[]; client: ClientContext; forgiveKeys?: readonly string[] },
  ): Promise<SignInResult | undefined> => {
    const { amr, client } = c;
    const forgiveKeys = c.forgiveKeys ?? [];
    if (banInForce(user, clock.now())) {
      // The first credential was right: its attempt does not count; the ban is said only now (docs/api.md, admin API: "Bans").
      await forgive(forgiveKeys);
      throw refuseBanned(user.id, client.ip);
    }
    if (user.email !== null && !user.is_email_verified) {
      // The first credential was right: its attempt does not count (docs/security.md §6).
      await forgive(forgiveKeys);
      securityEvent(log, 'sign_in.failed', { userId: user.id, ip: client.ip, reason: 'email_not_verified' });
      metrics.signIn('unverified');
      throw new AppError('auth.email_not_verified');
    }
    if (user.mfa_enabled) {
      // No session until the second step, which adds `otp` to this step's `amr`.
      await forgive(forgiveKeys);
      const challenge = newRefreshToken();
      const now = clock.now();
      await insertChallenge(db, {
        id: randomUUID(),
        tokenHash: sha256(challenge),
        userId: user.id,
        passwordVersion: user.password_version,
        passwordHash: user.password_hash,
        amr,
        now,
        expiresAt: new Date(now.getTime() + MFA_CHALLENGE_TTL_SECONDS * 1000),
      });
      securityEvent(log, 'sign_in.mfa_required', { userId: user.id, ip: client.ip });
      metrics.signIn('mfa_required');
      return { kind: 'mfa_required', user, challenge, challengeMaxAgeSeconds: MFA_CHALLENGE_TTL_SECONDS };
    }
    // One statement (one round trip, one commit) that creates nothing if the password changed
    // meanwhile. Not wrapped in BEGIN/COMMIT, unlike the refresh below: delivered late by a
    // silent network after this request answered 503, it would create a session whose refresh
    // token nobody ever received, which expires unused (docs/decisions.md). The access token is
    // signed (on libuv's thread pool) while the statement runs.
    const { sessionId, refreshToken, signing, create } = prepareSession(user.id, client, amr);
    if (!(await create(user.password_version, forgiveKeys))) {
      // Banned meanwhile (refused here), or the password changed since it was read.
      await refuseIfBanned(user.id, client.ip);
      return undefined;
    }
    const accessToken = await signing;
    securityEvent(log, 'sign_in.succeeded', { userId: user.id, sessionId, ip: client.ip });
    metrics.signIn('success');
    return { kind: 'session', user, sessionId, accessToken, refreshToken, refreshMaxAgeSeconds: sessionTtlSeconds };
  };

  return {
    finishSignIn,

    async requireRecentSignIn(caller) {
      const since = new Date(clock.now().getTime() - deps.reauthMaxAgeSeconds * 1000);
      if (!(await sessionSignedInSince(db, caller.session.id, since))) throw new AppError('auth.reauthentication_required');
    },

    async signIn(input, client) {
      const username = input.username === undefined ? undefined : normalizeUsername(input.username);
      const email = input.email === undefined ? undefined : normalizeEmail(input.email);
      // A phone that cannot be normalised matches nobody; it is still a credentials failure.
      const phone = input.phone === undefined ? undefined : (normalizePhone(input.phone) ?? input.phone);
      const subjects = [
        ...(username === undefined ? [] : [`username:${username}`]),
        ...(email === undefined ? [] : [`email:${email}`]),
        ...(phone === undefined ? [] : [`phone:${phone}`]),
      ];
      const { user, rateLimitKeys } = await countAttemptAndFindUser(subjects, client.ip, { username, email, phone });
      const password = input.password.normalize('NFKC');
      // Unknown users cost one argon2id verification too, so timing does not reveal who exists.
      // A user created without a password (docs/api.md, admin API) has none to match: the same cost and answer as a wrong one.
      const storedHash = user?.password_hash ?? null;
      const passwordOk = storedHash === null ? (await hasher.verifyDummy(password), false) : await hasher.verify(storedHash, password);
      if (user === undefined || storedHash === null || !passwordOk) {
        await countAccountFailure(user, subjects);
        const reason = user === undefined ? 'unknown_identifier' : storedHash === null ? 'no_password' : 'wrong_password';
        securityEvent(log, 'sign_in.failed', { userId: user?.id, ip: client.ip, reason });
        metrics.signIn('bad_credentials');
        throw new AppError('auth.invalid_credentials');
      }
      const result = await finishSignIn(user, { amr: PASSWORD_AMR, client, forgiveKeys: rateLimitKeys });
      if (result === undefined) {
        // The password was changed or reset since it was checked (a re-hash of the same password
        // keeps its version): the one typed is no longer the account's.
        metrics.signIn('bad_credentials');
        throw new AppError('auth.invalid_credentials');
      }
      // A hash with weaker argon2id parameters than configured is re-hashed now, once the
      // session or challenge is stored (a challenge checks the password's version, which a
      // re-hash leaves as it is).
      if (hasher.needsRehash(storedHash)) upgradeHashInBackground(user.id, storedHash, password);
      return result;
    },

    async startSession(user, { checkedPasswordVersion, amr, client, forgiveKeys = [] }) {
      const { sessionId, refreshToken, signing, create } = prepareSession(user.id, client, amr);
      const created = await create(checkedPasswordVersion, forgiveKeys);
      if (!created) {
        await refuseIfBanned(user.id, client.ip);
        return undefined;
      }
      const accessToken = await signing;
      securityEvent(log, 'sign_in.succeeded', { userId: user.id, sessionId, ip: client.ip });
      metrics.signIn('success');
      return { sessionId, accessToken, refreshToken, refreshMaxAgeSeconds: sessionTtlSeconds };
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

    async logout(auth) {
      if (await revokeSession(db, auth.session.id, 'logout', clock.now())) metrics.sessionsRevoked('logout');
    },

    async list(auth) {
      return listActiveSessions(db, auth.user.id, clock.now());
    },

    async revokeAll(auth) {
      const count = await revokeAllSessions(db, auth.user.id, 'revoke_all', clock.now());
      metrics.sessionsRevoked('revoke_all', count);
      return count;
    },

    async revokeOne(auth, sessionId) {
      if (!UUID_PATTERN.test(sessionId)) throw new AppError('auth.session_not_found');
      const owner = await findSessionOwner(db, sessionId);
      if (owner === undefined) throw new AppError('auth.session_not_found');
      if (owner !== auth.user.id) throw new AppError('auth.session_forbidden');
      if (await revokeSession(db, sessionId, 'revoked_by_user', clock.now())) metrics.sessionsRevoked('revoked_by_user');
    },
  };
}
