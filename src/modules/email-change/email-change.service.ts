import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { missingPassword, type CurrentPasswordCheck } from '../users/current-password.js';
import type { Authenticated } from '../sessions/sessions.service.js';
import { AppError, type ErrorCode } from '../../errors.js';
import type { AuthMetrics } from '../../metrics.js';
import { securityEvent } from '../audit/security-events.js';
import type { CodeCheck, OneTimeCodes } from '../codes/one-time-codes.service.js';
import { queueUserNotice } from '../mail/notices.js';
import type { ClientContext } from '../../plugins/client-context.js';
import { UNKNOWN_CLIENT } from '../rate-limits/client-network.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import type { RateLimiter, RateLimitRule } from '../rate-limits/rate-limits.service.js';
import { findUserByEmail, lockUserRow, replaceEmail, type UserRow } from '../users/users.shared.js';
import { changedMembers, toUser } from '../users/users.schemas.js';
import { recordEvent } from '../events/events.shared.js';

/** Dependencies of {@link createEmailChangeService}. */
export interface EmailChangeDeps {
  readonly db: Db;
  readonly clock: Clock;
  /** The check of the current password, whose budget change-email shares. */
  readonly currentPassword: CurrentPasswordCheck;
  /** The one-time codes of every purpose; these are of purpose `email_change`. */
  readonly codes: OneTimeCodes;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'changeEmailPerUser' | 'changeEmailConfirmPerIp'>;
  readonly log: FastifyBaseLogger;
  readonly metrics: Pick<AuthMetrics, 'emailChange'>;
  /** ONE_TIME_CODE_TTL_SECONDS. */
  readonly codeTtlSeconds: number;
  /** Called after a commit that queued an email. */
  readonly onEmailQueued: () => void;
}

/**
 * Email change, and the adding of an email to a phone-only account, by a code sent to the new
 * address (docs/api.md#change-email, docs/api.md#confirm-an-email-change). Nothing changes until
 * the code is confirmed: the account keeps its address, and signs in with it, meanwhile.
 */
export interface EmailChangeService {
  /**
   * Asks to move `user` (the caller of a Bearer request) to `newEmail` (already normalised). In
   * this order: `newEmail` equal to the current address is 400; every other request is counted
   * against the user (RATE_LIMIT_CHANGE_EMAIL_PER_USER per hour, before argon2id, never taken
   * back, since each one may mail a code); the password is checked; an address another user has
   * is 409 (after the password, so a stolen access token alone cannot probe which addresses
   * have accounts). Then, in one transaction: an `email_change` code bound to `newEmail` is
   * issued (superseding the user's older email-change codes and cancelling their queued
   * emails) with its email to `newEmail`, and an `email_change_requested` notice goes to the
   * current address if it is verified (docs/api.md#security-notices).
   * @throws AppError `auth.change_email.validation_failed` (400), `auth.invalid_current_password`
   *   (401, also when the password or the address changed meanwhile), `auth.change_email.email_taken`
   *   (409), `auth.change_email.rate_limited` (429, body code `auth.change_email.too_many_attempts`, Retry-After).
   */
  request(caller: Authenticated, input: { newEmail: string; password: string | undefined }, client: ClientContext): Promise<void>;
  /**
   * Confirms the change with the code sent to the new address. The user row is locked, then the
   * user's latest live email-change code (a wrong code counts one of its 5 tries and commits it).
   * The right code is consumed and, in the same transaction, the address replaced and marked
   * verified; the user's other email-change codes, and its verification and reset codes (they
   * were sent to the old address), end; an `email_changed` notice goes to the old address if it
   * was verified, and the `user.updated` event recorded (docs/api.md#event-types). Sessions are kept. Of two parallel confirmations one wins (the other gets
   * `code_expired`); of two users confirming one address, one wins and the other gets 409, its
   * code still live. Failed confirmations count against the client network
   * (RATE_LIMIT_CHANGE_EMAIL_CONFIRM_PER_IP per 15 minutes), a success takes its count back.
   * @returns the user as it is now.
   * @throws AppError `auth.change_email.code_expired` / `code_mismatch` / `too_many_attempts` (410),
   *   `auth.change_email.email_taken` (409), `auth.change_email.rate_limited` (429, Retry-After).
   */
  confirm(user: UserRow, input: { code: string }, client: ClientContext): Promise<UserRow>;
}

/** The 410 of each failed check (docs/api.md#confirm-an-email-change). */
const CHECK_FAILURE: Record<Exclude<CodeCheck['outcome'], 'right'>, ErrorCode> = {
  none: 'auth.change_email.code_expired',
  dead: 'auth.change_email.too_many_attempts',
  wrong: 'auth.change_email.code_mismatch',
};

/** Builds the {@link EmailChangeService}. */
export function createEmailChangeService(deps: EmailChangeDeps): EmailChangeService {
  const { db, clock, currentPassword, codes, limiter, rules, log, metrics, codeTtlSeconds, onEmailQueued } = deps;

  /** Counts one request of `subject` under `rule`; over the limit, logs `email_change.rate_limited` and throws the 429. */
  const enforce = (rule: RateLimitRule, subject: string, ip: string | null, reason: 'request' | 'confirm'): Promise<void> =>
    limiter.enforce(rule, subject, 'auth.change_email.rate_limited', () => securityEvent(log, 'email_change.rate_limited', { ip, reason }));

  return {
    async request(caller, input, client) {
      const { user } = caller;
      const { newEmail } = input;
      if (newEmail === user.email) {
        throw new AppError('auth.change_email.validation_failed', { message: 'new_email is already the email address of the account.' });
      }
      // A missing password is the request's 400, before anything counts.
      const missing = missingPassword(user, input.password, 'auth.change_email.validation_failed');
      if (missing !== undefined) throw missing;
      await enforce(rules.changeEmailPerUser, user.id, client.ip, 'request');
      await currentPassword.verify(caller, input.password, {
        purpose: 'change_email',
        ip: client.ip,
        tooMany: 'auth.change_email.rate_limited',
        validationError: 'auth.change_email.validation_failed',
      });
      if ((await findUserByEmail(db, newEmail)) !== undefined) throw new AppError('auth.change_email.email_taken');
      const now = clock.now();
      const issued = await db.transaction(async (tx) => {
        // Guarded by the address the caller had: a change confirmed meanwhile makes this one stale.
        const target = { id: user.id, username: user.username, email: user.email };
        if (!(await codes.issue(tx, { purpose: 'email_change', user: target, recipient: newEmail, ttlSeconds: codeTtlSeconds }))) return false;
        await queueUserNotice(tx, user, { kind: 'email_change_requested', at: now, client });
        return true;
      });
      if (!issued) throw new AppError('auth.invalid_current_password');
      onEmailQueued();
      metrics.emailChange('requested');
      securityEvent(log, 'email_change.requested', { userId: user.id, ip: client.ip });
    },

    async confirm(user, input, client) {
      const ip = client.ip ?? UNKNOWN_CLIENT;
      await enforce(rules.changeEmailConfirmPerIp, ip, client.ip, 'confirm');
      const now = clock.now();
      const outcome = await db.transaction(async (tx): Promise<{ failure: ErrorCode } | { user: UserRow; noticeQueued: boolean }> => {
        // The user row first, then the code: the order of every transaction that changes both.
        const before = await lockUserRow(tx, user.id);
        if (before === undefined) return { failure: CHECK_FAILURE.none };
        const checked = await codes.check(tx, { purpose: 'email_change', userId: user.id, email: null, code: input.code });
        // A wrong code's counted try commits with this transaction.
        if (checked.outcome !== 'right') return { failure: CHECK_FAILURE[checked.outcome] };
        if (!(await codes.consume(tx, checked.codeId))) return { failure: CHECK_FAILURE.none };
        // Throws 409 on a unique violation, which rolls back the consumption: the code stays live.
        const after = await replaceEmail(tx, user.id, checked.email, now);
        if (after === undefined) return { failure: CHECK_FAILURE.none };
        await recordEvent(tx, { type: 'user.updated', data: { user: toUser(after), changed: changedMembers(toUser(before), toUser(after)) } }, now);
        await codes.revokeAll(tx, 'email_change', { id: user.id, email: null });
        if (before.email !== null) {
          // Codes sent to the old address must not act on the account any more.
          await codes.revokeAll(tx, 'verification', { id: user.id, email: before.email });
          await codes.revokeAll(tx, 'password_reset', { id: user.id, email: before.email });
        }
        const noticeQueued = await queueUserNotice(tx, before, { kind: 'email_changed', at: now, client });
        return { user: after, noticeQueued };
      }).catch(async (err: unknown) => {
        // The right code for an address taken meanwhile: no guess, so its count is taken back.
        if (err instanceof AppError && err.code === 'auth.change_email.email_taken') await limiter.forgive(rules.changeEmailConfirmPerIp, ip);
        throw err;
      });
      if ('failure' in outcome) throw new AppError(outcome.failure);
      await limiter.forgive(rules.changeEmailConfirmPerIp, ip);
      if (outcome.noticeQueued) onEmailQueued();
      metrics.emailChange('completed');
      securityEvent(log, 'email.changed', { userId: user.id, ip: client.ip });
      return outcome.user;
    },
  };
}
