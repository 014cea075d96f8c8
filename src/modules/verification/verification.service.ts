import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { AppError, type ErrorCode } from '../../errors.js';
import type { FastifyBaseLogger } from 'fastify';
import { securityEvent } from '../audit/security-events.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import { tooManyAttempts, type RateLimiter } from '../rate-limits/rate-limits.service.js';
import { UNKNOWN_CLIENT } from '../rate-limits/client-network.js';
import { findUserByEmail, findUserById, markEmailVerified, type UserRow } from '../users/users.shared.js';
import type { OneTimeCodes } from '../codes/one-time-codes.service.js';
import { recordEvent } from '../events/events.shared.js';
import { toUser } from '../users/users.schemas.js';

export { MAX_CODE_ATTEMPTS } from '../codes/one-time-codes.service.js';

/** Dependencies of {@link createVerificationService}. */
export interface VerificationDeps {
  readonly db: Db;
  readonly clock: Clock;
  /** The one-time codes of every purpose; these are of purpose `verification`. */
  readonly codes: OneTimeCodes;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'verifyPerIp' | 'resendPerAddress' | 'resendPerIp'>;
  readonly log: FastifyBaseLogger;
  readonly codeTtlSeconds: number;
  /** Called after a commit that queued an email. */
  readonly onEmailQueued: () => void;
}

/** Email verification by 6-digit code (docs/api.md#operations, docs/api.md#verification-codes). */
export interface VerificationService {
  /**
   * Inside the caller's transaction: supersedes the user's older codes, cancels their emails
   * still waiting in the outbox (one being sent right now is left to finish), stores a new code
   * (HMAC at rest) and queues its email, so all commit together and a superseded code's email is
   * never sent after the newer one's. Nothing happens when the user was deleted since the lookup.
   * @returns false when there is no such user any more.
   */
  issueCode(tx: Queryable, user: Pick<UserRow, 'id' | 'username'> & { email: string }): Promise<boolean>;
  /**
   * Verifies `email` with `code` (already normalised). Resolves when the email is verified now
   * or was already (204). Attempts on one code are serialised by a row lock; at most
   * {@link MAX_CODE_ATTEMPTS} wrong attempts are counted, and parallel right codes change the
   * state once (docs/api.md#verification-codes).
   * Failed verifications also count against the client (RATE_LIMIT_VERIFY_PER_IP per 15
   * minutes). Nothing is counted per address: wrong codes sent by a stranger must not stop the
   * owner's right code (ASVS 5.0 V6.1.1). The verification records the `user.email_verified`
   * event in its transaction (docs/api.md#event-types). The guesses an address can receive stay bounded by
   * the 5 tries of each code and by how often codes are issued (resend: one per address per
   * 60 s), docs/security.md.
   * @throws AppError `auth.verify_email.user_not_found` (404), `auth.verify_email.code_expired`,
   *   `auth.verify_email.code_mismatch`, `auth.verify_email.too_many_attempts` (410),
   *   `auth.verify_email.rate_limited` (429, Retry-After: this client's failures).
   */
  verify(email: string, code: string, client: { ip: string | null }): Promise<void>;
  /**
   * Queues a fresh code for an unverified address; does nothing for unknown or verified ones,
   * answering the same either way (no enumeration). The new code supersedes the older ones and
   * their emails still waiting in the outbox are cancelled ({@link issueCode}).
   * @throws AppError `auth.resend_verification.too_many_attempts` (429, Retry-After) when the
   *   client is over RATE_LIMIT_RESEND_PER_IP resends this hour (counted first, so such a client
   *   does not also use up the address's resend), or on a second resend for the address within
   *   60 s (docs/decisions.md, "Rate limits"), known or not.
   */
  resend(email: string, client: { ip: string | null }): Promise<void>;
}

/** Builds the {@link VerificationService} over the database, clock and derived HMAC keys. */
export function createVerificationService(deps: VerificationDeps): VerificationService {
  const { db, clock, codes, limiter, rules, log, codeTtlSeconds, onEmailQueued } = deps;

  const issueCode: VerificationService['issueCode'] = (tx, user) =>
    codes.issue(tx, { purpose: 'verification', user: { id: user.id, username: user.username, email: user.email }, ttlSeconds: codeTtlSeconds });

  return {
    issueCode,

    async verify(email, code, client) {
      const user = await findUserByEmail(db, email);
      if (user === undefined) throw new AppError('auth.verify_email.user_not_found');
      if (user.is_email_verified) return;
      await limiter.enforce(rules.verifyPerIp, client.ip ?? UNKNOWN_CLIENT, 'auth.verify_email.rate_limited', () =>
        securityEvent(log, 'verify_email.rate_limited', { userId: user.id, ip: client.ip }),
      );
      // One transaction with the code row locked: the comparison, the attempt count and the
      // consumption of one code never interleave, so 50 parallel guesses make exactly 5
      // attempts, and of two parallel right codes one verifies and the other then finds the
      // email verified. A wrong attempt commits even though the request fails.
      const outcome = await db.transaction(async (tx): Promise<'verified' | ErrorCode> => {
        const checked = await codes.check(tx, { purpose: 'verification', userId: user.id, email, code });
        switch (checked.outcome) {
          case 'none':
            return (await findUserById(tx, user.id))?.is_email_verified === true ? 'verified' : 'auth.verify_email.code_expired';
          case 'dead':
            return 'auth.verify_email.too_many_attempts';
          case 'wrong':
            return 'auth.verify_email.code_mismatch';
          case 'right': {
            await codes.consume(tx, checked.codeId);
            const now = clock.now();
            const verified = await markEmailVerified(tx, user.id, email, now);
            if (verified !== undefined) await recordEvent(tx, { type: 'user.email_verified', data: { user: toUser(verified) } }, now);
            return 'verified';
          }
        }
      });
      if (outcome !== 'verified') throw new AppError(outcome);
      await limiter.forgive(rules.verifyPerIp, client.ip ?? UNKNOWN_CLIENT);
    },

    async resend(email, client) {
      const { verdict } = await limiter.hitAll({
        first: { rule: rules.resendPerIp, subject: client.ip ?? UNKNOWN_CLIENT },
        rule: rules.resendPerAddress,
        subjects: [email],
      });
      if (!verdict.allowed) throw tooManyAttempts('auth.resend_verification.too_many_attempts', verdict.retryAfterSeconds);
      const user = await findUserByEmail(db, email);
      if (user === undefined || user.is_email_verified || user.email === null) return;
      const target = { id: user.id, username: user.username, email: user.email };
      // A user deleted since the lookup: no code, and the same 204 as an unknown address.
      if (await db.transaction((tx) => issueCode(tx, target))) onEmailQueued();
    },
  };
}
