import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { AppError } from '../../errors.js';
import type { AuthMetrics } from '../../metrics.js';
import { normalizePassword, type PasswordHasher } from '../../crypto/password.js';
import { queueUserNotice } from '../mail/notices.js';
import type { ClientContext } from '../../plugins/client-context.js';
import { UNKNOWN_CLIENT } from '../rate-limits/client-network.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import type { RateLimiter } from '../rate-limits/rate-limits.service.js';
import { createCredentialsChanges } from './credentials-changed.js';
import { revokeAllSessions } from '../sessions/sessions.shared.js';
import type { OneTimeCodes } from '../codes/one-time-codes.service.js';
import type { VerificationService } from '../verification/verification.service.js';
import { normalizeEmail, normalizePhone, normalizeUsername } from './identifiers.js';
import type { BreachedPasswordCheck } from './breached-passwords.js';
import { checkPassword, SERVICE_NAME } from './password-policy.js';
import type { CurrentPasswordCheck } from './current-password.js';
import type { Authenticated, SessionsService } from '../sessions/sessions.service.js';
import type { FastifyBaseLogger } from 'fastify';
import { findTakenIdentifier, insertUser, replacePasswordHash, setBan, setFirstPasswordHash, type BanState, type UserRow } from './users.repo.js';
import { securityEvent } from '../audit/security-events.js';
import { toUser } from './users.schemas.js';
import { recordEvent } from '../events/events.shared.js';

/** A sign-up request after schema validation (docs/api.md#operations SignUpRequest). */
export interface SignUpInput {
  username: string;
  email?: string | undefined;
  phone?: string | undefined;
  password: string;
}

/** Dependencies of {@link createUsersService}. */
export interface UsersDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly hasher: PasswordHasher;
  readonly verification: VerificationService;
  /** The one-time codes: a password change ends the outstanding reset codes and their queued emails. */
  readonly codes: OneTimeCodes;
  readonly onEmailQueued: () => void;
  /** The check of the current password, whose budget change-password shares. */
  readonly currentPassword: CurrentPasswordCheck;
  /** Counts the sessions a password change revokes. */
  readonly metrics: Pick<AuthMetrics, 'sessionsRevoked'>;
  /** Counts sign-ups per client network (`signUpPerIp`, docs/api.md#rate-limits). */
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'signUpPerIp'>;
  /** The breached-password check of new passwords (PASSWORD_BREACH_CHECK=hibp); undefined: none. */
  readonly breachedPasswords?: BreachedPasswordCheck | undefined;
  /** The recent-sign-in check of {@link UsersService.setPassword}. */
  readonly sessions: Pick<SessionsService, 'requireRecentSignIn'>;
  readonly log: FastifyBaseLogger;
}

/** Sign-up and password change. */
export interface UsersService {
  /**
   * Creates a user. First the request counts against its client network (`signUpPerIp`,
   * docs/api.md#rate-limits; every attempt counts, before any work). Identifiers are normalised
   * (docs/api.md#identifiers) and the password validated before it is hashed
   * (docs/api.md#passwords): its length, then the password policy of
   * {@link checkPassword} (NIST SP 800-63B-4 §3.1.1.2). With an email, the user, the
   * verification code and its outbox row commit in one transaction (docs/api.md#sign-up), with
   * the `user.created` event (docs/api.md#event-types).
   * @throws AppError `auth.sign_up.validation_failed` (400) for a phone or password that fails
   *   after normalisation or a password the policy refuses (the message says why);
   *   `auth.sign_up.{username,email,phone}_taken` (409), also for races;
   *   `auth.sign_up.too_many_attempts` (429, Retry-After; logged as `sign_up.rate_limited`).
   */
  signUp(input: SignUpInput, client: Pick<ClientContext, 'ip'>): Promise<UserRow>;
  /**
   * Replaces the password of `user` and revokes all of the user's sessions in one transaction
   * (docs/api.md#operations). The new password must pass the same policy as at sign-up, with the user's
   * username and email as context; it is checked before the current password. Every attempt is
   * first counted against the user (RATE_LIMIT_SIGN_IN_PER_IDENTIFIER per 15 minutes), before the
   * policy and argon2id run, and only a successful change takes its count back. Of two parallel
   * changes exactly one wins; the other gets 401. A verified email address gets a
   * `password_changed` notice from `client`, queued in the same transaction
   * (docs/api.md#security-notices), with the `password.changed` event and a `session.revoked`
   * event per revoked session (docs/api.md#event-types): the fan-out of `CredentialsChanges`
   * (credentials-changed.ts), which also logs the `password.changed` security event after commit.
   * @throws AppError `auth.change_password.validation_failed` (400) for a bad length or a
   *   password the policy refuses (the message says why), `auth.invalid_current_password` (401),
   *   `auth.change_password.too_many_attempts` (429, Retry-After).
   */
  changePassword(caller: Authenticated, input: { currentPassword: string; newPassword: string }, client: ClientContext): Promise<void>;
  /**
   * Sets the first password of the caller, a user who has none (signed up through an identity
   * provider), docs/api.md#set-a-password. In this order: a recent sign-in of the calling
   * session; no password yet; the password policy (as at sign-up). Then it is hashed and stored
   * only while the user still has none (a parallel request loses with 409), with a
   * `password_set` notice in the same transaction. No session is revoked.
   * @throws AppError `auth.reauthentication_required` (401), `auth.password.already_set` (409),
   *   `auth.password.validation_failed` (400, the message says why).
   */
  setPassword(caller: Authenticated, input: { newPassword: string }, client: ClientContext): Promise<void>;
}

/**
 * Bans a user (docs/api.md, admin API: "Bans"): sets the ban (a new one replaces the one in force)
 * and revokes every unrevoked session of the user (`revoked_reason = 'banned'`, each with its
 * `session.revoked` event, docs/api.md#event-types): two statements. Run it in a
 * transaction ({@link Db.transaction}) with whatever else records the ban: the user row is
 * updated first, so a sign-in that is creating a session (which share-locks the row and refuses
 * a banned user) either commits before the ban, whose revocation then sees its session, or
 * waits and creates nothing.
 * @param ban `until`: when it ends (must be after `now`; the caller checks), or null: indefinite.
 * @returns the ban as stored and the number of sessions revoked, or undefined when there is no such user.
 */
export async function banUser(
  q: Queryable,
  userId: string,
  ban: { until: Date | null; reason: string | null },
  now: Date,
): Promise<{ ban: BanState; sessionsRevoked: number } | undefined> {
  const stored = await setBan(q, userId, ban, now);
  if (stored === undefined) return undefined;
  const sessionsRevoked = await revokeAllSessions(q, userId, 'banned', now);
  return { ban: stored, sessionsRevoked };
}

/** Builds the {@link UsersService}: sign-up and password change over the database, hasher and verification service. */
export function createUsersService(deps: UsersDeps): UsersService {
  const { db, clock, hasher, verification, codes, onEmailQueued, currentPassword, metrics, limiter, rules, log } = deps;
  const policy = { breached: deps.breachedPasswords };
  const credentialsChanges = createCredentialsChanges({ codes, metrics, log, onEmailQueued });
  return {
    async signUp(input, client) {
      // Counted per client network before any work (docs/api.md#rate-limits); every attempt counts.
      await limiter.enforce(rules.signUpPerIp, client.ip ?? UNKNOWN_CLIENT, 'auth.sign_up.too_many_attempts', () =>
        securityEvent(log, 'sign_up.rate_limited', { ip: client.ip }),
      );
      const username = normalizeUsername(input.username);
      const email = input.email === undefined ? null : normalizeEmail(input.email);
      let phone: string | null = null;
      if (input.phone !== undefined) {
        phone = normalizePhone(input.phone) ?? null;
        if (phone === null) {
          throw new AppError('auth.sign_up.validation_failed', { message: 'phone must have 8 to 15 digits, optionally with a leading +.' });
        }
      }
      const password = normalizePassword(input.password);
      if (password === undefined) {
        throw new AppError('auth.sign_up.validation_failed', { message: 'password must be 8 to 72 characters after NFKC normalisation.' });
      }
      const refused = await checkPassword(password, { username, email, serviceName: SERVICE_NAME }, policy);
      if (refused !== undefined) throw new AppError('auth.sign_up.validation_failed', { message: refused.reason });
      // A cheap pre-check spares an argon2id hash for a taken identifier; the unique indexes still decide races.
      const taken = await findTakenIdentifier(db, { username, email, phone });
      if (taken !== undefined) throw new AppError(`auth.sign_up.${taken}_taken`);
      const passwordHash = await hasher.hash(password);
      const now = clock.now();
      const user = await db.transaction(async (tx) => {
        const created = await insertUser(tx, { id: randomUUID(), username, email, phone, password_hash: passwordHash }, now);
        if (email !== null) await verification.issueCode(tx, { id: created.id, username, email });
        await recordEvent(tx, { type: 'user.created', data: { user: toUser(created) } }, now);
        return created;
      });
      if (email !== null) onEmailQueued();
      return user;
    },

    async changePassword(caller, input, client) {
      const { user } = caller;
      const newPassword = normalizePassword(input.newPassword);
      if (newPassword === undefined) {
        throw new AppError('auth.change_password.validation_failed', { message: 'new_password must be 8 to 72 characters after NFKC normalisation.' });
      }
      // Every attempt counts per user before any costly check (the password policy takes tens of
      // milliseconds of the event loop, argon2id more); only a right current password takes it back.
      await currentPassword.verify(caller, input.currentPassword, {
        purpose: 'change_password',
        validationError: 'auth.change_password.validation_failed',
        ip: client.ip,
        tooMany: 'auth.change_password.too_many_attempts',
        before: async () => {
          const refused = await checkPassword(newPassword, { username: user.username, email: user.email, serviceName: SERVICE_NAME }, policy);
          if (refused !== undefined) throw new AppError('auth.change_password.validation_failed', { message: refused.reason });
        },
      });
      const newHash = await hasher.hash(newPassword);
      const now = clock.now();
      const changed = await db.transaction(async (tx) => {
        const replaced = await replacePasswordHash(tx, user.id, { expectedVersion: user.password_version, newHash }, now);
        if (!replaced) throw new AppError('auth.invalid_current_password');
        return credentialsChanges.revoke(tx, { cause: 'password_changed', user, now, client, sessionId: caller.session.id });
      });
      credentialsChanges.announce(changed);
    },

    async setPassword(caller, input, client) {
      const { user } = caller;
      await deps.sessions.requireRecentSignIn(caller);
      if (user.password_hash !== null) throw new AppError('auth.password.already_set');
      const newPassword = normalizePassword(input.newPassword);
      if (newPassword === undefined) {
        throw new AppError('auth.password.validation_failed', { message: 'new_password must be 8 to 72 characters after NFKC normalisation.' });
      }
      const refused = await checkPassword(newPassword, { username: user.username, email: user.email, serviceName: SERVICE_NAME }, policy);
      if (refused !== undefined) throw new AppError('auth.password.validation_failed', { message: refused.reason });
      const newHash = await hasher.hash(newPassword);
      const now = clock.now();
      const set = await db.transaction(async (tx) => {
        const updated = await setFirstPasswordHash(tx, user.id, newHash, now);
        if (updated === undefined) return undefined;
        await recordEvent(tx, { type: 'password.changed', data: { user_id: user.id, via: 'set' } }, now);
        return { noticed: await queueUserNotice(tx, user, { kind: 'password_set', at: now, client }) };
      });
      if (set === undefined) throw new AppError('auth.password.already_set');
      if (set.noticed) onEmailQueued();
      securityEvent(log, 'password.set', { userId: user.id, sessionId: caller.session.id, ip: client.ip });
    },
  };
}
