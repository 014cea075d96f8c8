import type { FastifyBaseLogger } from 'fastify';
import type { PasswordHasher } from '../../crypto/password.js';
import { AppError, type ErrorCode } from '../../errors.js';
import { securityEvent } from '../audit/security-events.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import type { RateLimiter } from '../rate-limits/rate-limits.service.js';
import type { UserRow } from './users.repo.js';

/** The operations of a signed-in user that ask for the current password; the `reason` of its security events. */
export type CurrentPasswordPurpose = 'change_password' | 'delete_account' | 'change_email' | 'mfa_setup' | 'mfa_disable' | 'mfa_recovery_codes';

/** Dependencies of {@link createCurrentPasswordCheck}. */
export interface CurrentPasswordDeps {
  readonly hasher: PasswordHasher;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'currentPasswordPerUser' | 'signInPerAccount'>;
  readonly log: FastifyBaseLogger;
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
   * against the user's argon2id hash. A right password takes the count back. A wrong one counts
   * a failed sign-in of the account and logs `password.check_failed` with `purpose` as reason.
   * @throws AppError `auth.invalid_current_password` (401); `c.tooMany` (429, Retry-After) when
   *   the budget is spent, before anything else runs; whatever `before` throws (the count stays).
   */
  verify(
    user: UserRow,
    password: string,
    c: { purpose: CurrentPasswordPurpose; ip: string | null; tooMany: ErrorCode; before?: () => Promise<void> },
  ): Promise<void>;
}

/** Builds the {@link CurrentPasswordCheck}. */
export function createCurrentPasswordCheck(deps: CurrentPasswordDeps): CurrentPasswordCheck {
  const { hasher, limiter, rules, log } = deps;
  return {
    async verify(user, password, c) {
      const verdict = await limiter.hit(rules.currentPasswordPerUser, user.id);
      if (!verdict.allowed) {
        securityEvent(log, 'password.check_locked', { userId: user.id, ip: c.ip, reason: c.purpose });
        throw new AppError(c.tooMany, { headers: { 'retry-after': String(verdict.retryAfterSeconds) } });
      }
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
