import type { FastifyBaseLogger } from 'fastify';
import type { PasswordHasher } from '../../crypto/password.js';
import { AppError, type ValidationErrorCode } from '../../errors.js';
import { securityEvent } from '../audit/security-events.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import type { RateLimiter, TooManyAttemptsCode } from '../rate-limits/rate-limits.service.js';
import type { Authenticated, SessionsService } from '../sessions/sessions.service.js';
import type { UserRow } from './users.repo.js';

/** The operations of a signed-in user that ask for the current password; the `reason` of its security events. */
export type CurrentPasswordPurpose = 'change_password' | 'delete_account' | 'change_email' | 'mfa_setup' | 'mfa_disable' | 'mfa_recovery_codes';

/**
 * The 400 of an operation whose `password` was left out by a user who has one (only a user
 * without a password may leave it out, docs/api.md#users-without-a-password); undefined otherwise.
 */
export function missingPassword(user: Pick<UserRow, 'password_hash'>, password: string | undefined, validationError: ValidationErrorCode): AppError | undefined {
  return password === undefined && user.password_hash !== null ? new AppError(validationError, { message: 'password is required' }) : undefined;
}

/** Dependencies of {@link createCurrentPasswordCheck}. */
export interface CurrentPasswordDeps {
  readonly hasher: PasswordHasher;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'currentPasswordPerUser' | 'signInPerAccount'>;
  readonly log: FastifyBaseLogger;
  /** The recent-sign-in check that stands in for the password of a user who has none. */
  readonly sessions: Pick<SessionsService, 'requireRecentSignIn'>;
}

/**
 * The check of a signed-in user's current password, one for every operation that asks for it
 * (docs/security.md, "Rate limits"). A stolen access token is not the password: every guess it
 * makes, whichever operation it goes through, comes out of one budget per user
 * (`currentPasswordPerUser`: RATE_LIMIT_SIGN_IN_PER_IDENTIFIER per 15 minutes), and every wrong
 * one also counts as a failed sign-in of the account (`signInPerAccount`, NIST SP 800-63B-4
 * §3.2.2), so guesses by token and by sign-in add up in the account's window. That window does
 * not refuse the check itself: strangers can fill it from anywhere, and its signed-in owner
 * must still be able to change the password.
 */
export interface CurrentPasswordCheck {
  /**
   * Counts the attempt against the user's budget, then runs `before` (a cheaper refusal, such
   * as the new password's policy, that must not cost argon2id), then verifies `password` (NFKC)
   * against the caller's argon2id hash. A right password takes the count back. A wrong one counts
   * a failed sign-in of the account and logs `password.check_failed` with `purpose` as reason.
   *
   * `password` left out (docs/api.md#users-without-a-password): a user who has a password must
   * give it (`c.validationError`, 400, nothing counted); a user who has none (signed up through
   * an identity provider) proves presence by a recent sign-in of the calling session instead,
   * then `before` runs. A password given by a user who has none never matches (401).
   * @throws AppError `auth.invalid_current_password` (401); `auth.reauthentication_required`
   *   (401); `c.validationError` (400); `c.tooMany` (429, Retry-After) when the budget is spent,
   *   before the password is checked; whatever `before` throws (the count stays).
   */
  verify(
    caller: Authenticated,
    password: string | undefined,
    c: { purpose: CurrentPasswordPurpose; ip: string | null; tooMany: TooManyAttemptsCode; validationError: ValidationErrorCode; before?: () => Promise<void> },
  ): Promise<void>;
}

/** Builds the {@link CurrentPasswordCheck}. */
export function createCurrentPasswordCheck(deps: CurrentPasswordDeps): CurrentPasswordCheck {
  const { hasher, limiter, rules, log, sessions } = deps;
  return {
    async verify(caller, password, c) {
      const { user } = caller;
      const missing = missingPassword(user, password, c.validationError);
      if (missing !== undefined) throw missing;
      if (password === undefined) {
        await sessions.requireRecentSignIn(caller);
        if (c.before !== undefined) await c.before();
        return;
      }
      await limiter.enforce(rules.currentPasswordPerUser, user.id, c.tooMany, () =>
        securityEvent(log, 'password.check_locked', { userId: user.id, ip: c.ip, reason: c.purpose }),
      );
      if (c.before !== undefined) await c.before();
      const typed = password.normalize('NFKC');
      // A user without a password (created by an operator) has none to match: the cost and answer of a wrong one.
      const ok = user.password_hash === null ? (await hasher.verifyDummy(typed), false) : await hasher.verify(user.password_hash, typed);
      if (!ok) {
        await limiter.hit(rules.signInPerAccount, user.id);
        securityEvent(log, 'password.check_failed', { userId: user.id, ip: c.ip, reason: c.purpose });
        throw new AppError('auth.invalid_current_password');
      }
      await limiter.forgive(rules.currentPasswordPerUser, user.id);
    },
  };
}
