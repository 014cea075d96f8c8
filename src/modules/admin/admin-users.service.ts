import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { AppError, type ErrorCode } from '../../errors.js';
import type { AuthMetrics } from '../../metrics.js';
import { normalizePassword, type PasswordHasher } from '../../crypto/password.js';
import { securityEvent } from '../audit/security-events.js';
import { queueUserNotice } from '../mail/notices.js';
import { deleteTotp, findTotp } from '../mfa/mfa.shared.js';
import type { PasswordResetService } from '../password-reset/password-reset.service.js';
import { findSessionOwner, listActiveSessions, revokeSession } from '../sessions/sessions.shared.js';
import type { BreachedPasswordCheck } from '../users/breached-passwords.js';
import { normalizeEmail, normalizePhone, normalizeUsername } from '../users/identifiers.js';
import { checkPassword, SERVICE_NAME } from '../users/password-policy.js';
import { findTakenIdentifier, findUserById, insertUser, lockUser, lockUserRow, unbanUser } from '../users/users.shared.js';
import { banUser } from '../users/users.service.js';
import { changedMembers, toUser } from '../users/users.schemas.js';
import { recordEvent } from '../events/events.shared.js';
import { recordAdminAudit, type AuditActor } from './admin-audit.repo.js';
import { findAdminUser, listAdminUsers, updateUserIdentity, type UserIdentityFields } from './admin-users.repo.js';
import { toAdminSession, toAdminUser, type AdminSession, type AdminUser, type BanRequest, type CreateUserRequest, type UpdateUserRequest } from './admin.schemas.js';
import { pageOf, positionAfter } from './keyset-cursor.js';
import { deleteUserAccount, OPERATOR_CLIENT, revokeUserSessions } from './operator-actions.js';

/** The sign-up 409 codes of `insertUser` and the admin API's codes for the same conflicts. */
const ADMIN_TAKEN: Partial<Record<ErrorCode, ErrorCode>> = {
  'auth.sign_up.username_taken': 'admin.username_taken',
  'auth.sign_up.email_taken': 'admin.email_taken',
  'auth.sign_up.phone_taken': 'admin.phone_taken',
};

/** A 400 of the admin API with a message that says which rule failed. */
function invalid(message: string): AppError {
  return new AppError('admin.validation_failed', { message });
}

/** Dependencies of {@link createAdminUsersService}. */
export interface AdminUsersDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly hasher: PasswordHasher;
  /** Issues the reset code and queues its email (the admin API's `password-reset`). */
  readonly passwordReset: Pick<PasswordResetService, 'issueCode'>;
  readonly metrics: Pick<AuthMetrics, 'accountsDeleted' | 'sessionsRevoked'>;
  readonly log: FastifyBaseLogger;
  /** Called after a commit that queued an email. */
  readonly onEmailQueued: () => void;
  /** HMAC key of the listing's cursors (KeyStore.adminCursorHmacKey). */
  readonly cursorKey: Buffer;
  /** The breached-password check of new passwords, as at sign-up; undefined: none. */
  readonly breachedPasswords?: BreachedPasswordCheck | undefined;
}

/** What the admin API does to users and their sessions (docs/admin-api.md). Every change is audited with `actor`. */
export interface AdminUsersService {
  /**
   * A page of users newest first (`query`: an exact id, a prefix of the username or email, any
   * case, or of the stored phone); `nextCursor` null exactly when no user follows the page.
   * @throws AppError `admin.validation_failed` (400) for a cursor the service did not issue for this listing.
   */
  list(c: { query: string | undefined; limit: number; cursor: string | undefined }): Promise<{ users: AdminUser[]; nextCursor: string | null }>;
  /** @throws AppError `admin.user_not_found` (404). */
  get(userId: string): Promise<AdminUser>;
  /**
   * Creates a user with the sign-up rules (docs/api.md#identifiers, the password policy) and no
   * email sent: without `password` the user has none, `is_email_verified` is false unless given.
   * @throws AppError `admin.validation_failed` (400), `admin.{username,email,phone}_taken` (409).
   */
  create(actor: AuditActor, input: CreateUserRequest): Promise<AdminUser>;
  /**
   * Changes identifiers and verification flags with the sign-up rules; a changed email or phone
   * is unverified unless the same request sets its flag true; one of email and phone remains.
   * A request that changes nothing records nothing.
   * @throws AppError `admin.validation_failed` (400), `admin.user_not_found` (404), `admin.*_taken` (409).
   */
  update(actor: AuditActor, userId: string, patch: UpdateUserRequest): Promise<AdminUser>;
  /** Deletes the account ({@link deleteUserAccount}). @throws AppError `admin.user_not_found` (404). */
  remove(actor: AuditActor, userId: string): Promise<void>;
  /**
   * Bans the user until `until` (absent: indefinitely), replacing a ban in force, and revokes every
   * session of the user in the same transaction.
   * @throws AppError `admin.validation_failed` (400) for an `until` not in the future, `admin.user_not_found` (404).
   */
  ban(actor: AuditActor, userId: string, input: BanRequest): Promise<AdminUser>;
  /** Lifts the ban in force; the revoked sessions stay revoked. Records nothing when none was in force. @throws AppError `admin.user_not_found` (404). */
  unban(actor: AuditActor, userId: string): Promise<AdminUser>;
  /**
   * Queues the password-reset email of docs/api.md#request-a-password-reset to the user's address, without its
   * per-address limit. @throws AppError `admin.user_not_found` (404), `admin.no_email` (409).
   */
  sendPasswordReset(actor: AuditActor, userId: string): Promise<void>;
  /**
   * Removes the user's TOTP authenticator and recovery codes and queues the `mfa_disabled`
   * notice; nothing (and no audit entry) when TOTP is not on. @throws AppError `admin.user_not_found` (404).
   */
  resetMfa(actor: AuditActor, userId: string): Promise<void>;
  /** The user's active sessions, oldest first. @throws AppError `admin.user_not_found` (404). */
  listSessions(userId: string): Promise<AdminSession[]>;
  /** {@link revokeUserSessions}. @throws AppError `admin.user_not_found` (404). */
  revokeSessions(actor: AuditActor, userId: string): Promise<void>;
  /**
   * Revokes one session of the user; an already revoked one answers success and records nothing.
   * @throws AppError `admin.user_not_found` (404), `admin.not_found` (404: no such session of that user).
   */
  revokeSession(actor: AuditActor, userId: string, sessionId: string): Promise<void>;
}

/** Builds the {@link AdminUsersService}. */
export function createAdminUsersService(deps: AdminUsersDeps): AdminUsersService {
  const { db, clock, hasher, passwordReset, metrics, log, onEmailQueued, cursorKey } = deps;
  const policy = { breached: deps.breachedPasswords };

  /** The user as the admin API shows it, read in `q` at `now`. @throws AppError `admin.user_not_found` (404). */
  const view = async (q: Queryable, userId: string, now: Date): Promise<AdminUser> => {
    const row = await findAdminUser(q, userId);
    if (row === undefined) throw new AppError('admin.user_not_found');
    return toAdminUser(row, now);
  };

  /** The stored form of a phone as given, or a 400. */
  const storedPhone = (phone: string): string => {
    const stored = normalizePhone(phone);
    if (stored === undefined) throw invalid('phone must have 8 to 15 digits, optionally with a leading +.');
    return stored;
  };

  return {
    async list(c) {
      const after = positionAfter(cursorKey, 'users', c.cursor);
      // One more than a page: whether it comes back says whether a next page exists.
      const page = pageOf(cursorKey, 'users', await listAdminUsers(db, { query: c.query, after, limit: c.limit + 1 }), c.limit);
      const now = clock.now();
      return { users: page.items.map((row) => toAdminUser(row, now)), nextCursor: page.nextCursor };
    },

    get: (userId) => view(db, userId, clock.now()),

    async create(actor, input) {
      const username = normalizeUsername(input.username);
      const email = input.email === undefined ? null : normalizeEmail(input.email);
      const phone = input.phone === undefined ? null : storedPhone(input.phone);
      if (input.is_email_verified === true && email === null) throw invalid('is_email_verified needs an email.');
      let passwordHash: string | null = null;
      if (input.password !== undefined) {
        const password = normalizePassword(input.password);
        if (password === undefined) throw invalid('password must be 8 to 72 characters after NFKC normalisation.');
        const refused = await checkPassword(password, { username, email, serviceName: SERVICE_NAME }, policy);
        if (refused !== undefined) throw invalid(refused.reason);
        // A cheap pre-check spares an argon2id hash for a taken identifier; the unique indexes still decide races.
        const taken = await findTakenIdentifier(db, { username, email, phone });
        if (taken !== undefined) throw new AppError(`admin.${taken}_taken`);
        passwordHash = await hasher.hash(password);
      }
      const now = clock.now();
      const id = randomUUID();
      try {
        return await db.transaction(async (tx) => {
          const created = await insertUser(tx, { id, username, email, phone, password_hash: passwordHash, is_email_verified: input.is_email_verified ?? false }, now);
          await recordEvent(tx, { type: 'user.created', data: { user: toUser(created) } }, now);
          await recordAdminAudit(tx, actor, { action: 'user.create', userId: id, details: { username, has_password: passwordHash !== null } }, now);
          return view(tx, id, now);
        });
      } catch (err) {
        const taken = err instanceof AppError ? ADMIN_TAKEN[err.code] : undefined;
        throw taken === undefined ? err : new AppError(taken, { cause: err });
      }
    },

    async update(actor, userId, patch) {
      const phone = patch.phone === undefined || patch.phone === null ? patch.phone : storedPhone(patch.phone);
      const now = clock.now();
      return db.transaction(async (tx) => {
        const current = await lockUserRow(tx, userId);
        if (current === undefined) throw new AppError('admin.user_not_found');
        const next: UserIdentityFields = {
          username: patch.username === undefined ? current.username : normalizeUsername(patch.username),
          email: patch.email === undefined ? current.email : patch.email === null ? null : normalizeEmail(patch.email),
          phone: phone === undefined ? current.phone : phone,
          is_email_verified: false,
          is_phone_verified: false,
        };
        // A new address or number is unverified unless this request says it is verified.
        next.is_email_verified = patch.is_email_verified ?? (next.email === current.email ? current.is_email_verified : false);
        next.is_phone_verified = patch.is_phone_verified ?? (next.phone === current.phone ? current.is_phone_verified : false);
        if (next.email === null && next.phone === null) throw invalid('email or phone is required: a user keeps at least one of them.');
        if (next.is_email_verified && next.email === null) throw invalid('is_email_verified needs an email.');
        if (next.is_phone_verified && next.phone === null) throw invalid('is_phone_verified needs a phone.');
        const changed = changedMembers(toUser(current), toUser({ id: current.id, ...next }));
        if (changed.length > 0) {
          await updateUserIdentity(tx, userId, next, now);
          await recordEvent(tx, { type: 'user.updated', data: { user: toUser({ id: current.id, ...next }), changed } }, now);
          await recordAdminAudit(tx, actor, { action: 'user.update', userId, details: { changed } }, now);
        }
        return view(tx, userId, now);
      });
    },

    async remove(actor, userId) {
      const erased = await deleteUserAccount(db, actor, userId, clock.now());
      if (erased === undefined) throw new AppError('admin.user_not_found');
      metrics.accountsDeleted('operator');
      securityEvent(log, 'account.deleted', { userId, ip: actor.ip, reason: 'operator' });
      if (erased.noticeQueued) onEmailQueued();
    },

    async ban(actor, userId, input) {
      const now = clock.now();
      const until = input.until === undefined ? null : new Date(input.until);
      if (until !== null && !(until.getTime() > now.getTime())) throw invalid('until must be a date and time in the future.');
      const reason = input.reason ?? null;
      const { user, revoked } = await db.transaction(async (tx) => {
        const banned = await banUser(tx, userId, { until, reason }, now);
        if (banned === undefined) throw new AppError('admin.user_not_found');
        const bannedUntil = until === null ? null : until.toISOString();
        // A ban that replaces the one in force is a user.banned event too (docs/api.md#event-types).
        await recordEvent(tx, { type: 'user.banned', data: { user_id: userId, banned_until: bannedUntil, reason } }, now);
        await recordAdminAudit(tx, actor, { action: 'user.ban', userId, details: { until: bannedUntil, reason, sessions_revoked: banned.sessionsRevoked } }, now);
        return { user: await view(tx, userId, now), revoked: banned.sessionsRevoked };
      });
      metrics.sessionsRevoked('banned', revoked);
      securityEvent(log, 'session.revoked', { userId, ip: actor.ip, reason: 'banned', count: revoked });
      return user;
    },

    async unban(actor, userId) {
      const now = clock.now();
      return db.transaction(async (tx) => {
        const unbanned = await unbanUser(tx, userId, now);
        if (unbanned === undefined) throw new AppError('admin.user_not_found');
        if (unbanned.lifted) {
          await recordEvent(tx, { type: 'user.unbanned', data: { user_id: userId } }, now);
          await recordAdminAudit(tx, actor, { action: 'user.unban', userId, details: {} }, now);
        }
        return view(tx, userId, now);
      });
    },

    async sendPasswordReset(actor, userId) {
      const now = clock.now();
      await db.transaction(async (tx) => {
        const user = await lockUserRow(tx, userId);
        if (user === undefined) throw new AppError('admin.user_not_found');
        if (user.email === null || !(await passwordReset.issueCode(tx, user))) throw new AppError('admin.no_email');
        await recordAdminAudit(tx, actor, { action: 'user.password_reset', userId, details: {} }, now);
      });
      onEmailQueued();
    },

    async resetMfa(actor, userId) {
      const now = clock.now();
      const outcome = await db.transaction(async (tx) => {
        const user = await lockUserRow(tx, userId);
        if (user === undefined) throw new AppError('admin.user_not_found');
        const totp = await findTotp(tx, userId, { lock: true });
        // No second factor on (none, or one set up and never turned on): nothing to remove.
        if (totp?.enabled_at == null) return { removed: false, noticed: false };
        await deleteTotp(tx, userId);
        await recordEvent(tx, { type: 'mfa.disabled', data: { user_id: userId } }, now);
        const noticed = await queueUserNotice(tx, user, { kind: 'mfa_disabled', at: now, client: OPERATOR_CLIENT });
        await recordAdminAudit(tx, actor, { action: 'user.mfa_reset', userId, details: {} }, now);
        return { removed: true, noticed };
      });
      if (outcome.removed) securityEvent(log, 'mfa.disabled', { userId, ip: actor.ip, reason: 'operator' });
      if (outcome.noticed) onEmailQueued();
    },

    async listSessions(userId) {
      if ((await findUserById(db, userId)) === undefined) throw new AppError('admin.user_not_found');
      return (await listActiveSessions(db, userId, clock.now())).map(toAdminSession);
    },

    async revokeSessions(actor, userId) {
      const count = await revokeUserSessions(db, actor, userId, clock.now());
      if (count === undefined) throw new AppError('admin.user_not_found');
      securityEvent(log, 'session.revoked', { userId, ip: actor.ip, reason: 'revoked_by_admin', count });
    },

    async revokeSession(actor, userId, sessionId) {
      const now = clock.now();
      const revoked = await db.transaction(async (tx) => {
        if (!(await lockUser(tx, userId))) throw new AppError('admin.user_not_found');
        if ((await findSessionOwner(tx, sessionId)) !== userId) throw new AppError('admin.not_found', { message: 'The user has no such session.' });
        const done = await revokeSession(tx, sessionId, 'revoked_by_admin', now);
        if (done) await recordAdminAudit(tx, actor, { action: 'sessions.revoke', userId, details: { session_id: sessionId } }, now);
        return done;
      });
      if (revoked) securityEvent(log, 'session.revoked', { userId, sessionId, ip: actor.ip, reason: 'revoked_by_admin', count: 1 });
    },
  };
}
