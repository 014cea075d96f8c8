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
 * (`currentPasswordPerUser`: RATE_LIMIT_SIGN_IN_PER_IDENTIFIER per 15 minutes) and out of the
 * account's failed sign-ins (`signInPerAccount`, RATE_LIMIT_SIGN_IN_PER_ACCOUNT an hour, NIST SP
 * 800-63B-4 §3.2.2), so the two ways of guessing a password share the account's limit.
 */
export interface CurrentPasswordCheck {
  /**
   * Counts the attempt against the user's budget and the account's failures (one statement),
   * then runs `before` (a cheaper refusal, such as the new password's policy, that must not
   * cost argon2id), then verifies `password` (NFKC) against the user's argon2id hash. A right
   * password takes both counts back; `before` refusing takes back the account's count only
   * (it was no guess). A wrong one logs `password.check_failed` with `purpose` as its reason.
   * @throws AppError `auth.invalid_current_password` (401); `c.tooMany` (429, Retry-After) when
   *   the budget or the account's failures are spent, before anything else runs; whatever
   *   `before` throws.
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
      const { verdict, keys } = await limiter.hitAll({
        first: { rule: rules.currentPasswordPerUser, subject: user.id },
        rule: rules.signInPerAccount,
        subjects: [user.id],
      });
      if (!verdict.allowed) {
        securityEvent(log, 'password.check_locked', { userId: user.id, ip: c.ip, reason: c.purpose });
        throw new AppError(c.tooMany, { headers: { 'retry-after': String(verdict.retryAfterSeconds) } });
      }
      if (c.before !== undefined) {
        try {
          await c.before();
        } catch (err) {
          // The user's budget keeps the count (the refusal had a cost); the account's failures do
          // not. `keys` holds the budget's key first, unless that rule is disabled.
          await limiter.forgiveKeys(rules.currentPasswordPerUser.limit > 0 ? keys.slice(1) : keys);
          throw err;
        }
      }
      if (!(await hasher.verify(user.password_hash, password.normalize('NFKC')))) {
        securityEvent(log, 'password.check_failed', { userId: user.id, ip: c.ip, reason: c.purpose });
        throw new AppError('auth.invalid_current_password');
      }
      await limiter.forgiveKeys(keys);
    },
  };
}
