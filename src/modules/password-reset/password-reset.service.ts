import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { AppError, type ErrorCode } from '../../errors.js';
import type { AuthMetrics } from '../../metrics.js';
import { normalizePassword, type PasswordHasher } from '../../crypto/password.js';
import { securityEvent } from '../audit/security-events.js';
import type { OneTimeCodes } from '../codes/one-time-codes.service.js';
import type { ClientContext } from '../../plugins/client-context.js';
import { listPasskeys } from '../passkeys/passkeys.shared.js';
import { passkeyNoticeLines } from '../passkeys/passkey-notices.js';
import { enqueueEmail } from '../mail/mail.shared.js';
import { UNKNOWN_CLIENT } from '../rate-limits/client-network.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import { tooManyAttempts, type RateLimiter } from '../rate-limits/rate-limits.service.js';
import type { BreachedPasswordCheck } from '../users/breached-passwords.js';
import { createCredentialsChanges } from '../users/credentials-changed.js';
import { checkPassword, SERVICE_NAME } from '../users/password-policy.js';
import { findUserByEmail, lockUser, markEmailVerified, setPasswordHash } from '../users/users.shared.js';
import { toUser } from '../users/users.schemas.js';
import { recordEvent } from '../events/events.shared.js';
import { newTimeOrderedId } from '../../crypto/ids.js';

/** The user id an unknown address is checked under: no user has it, so the lookup finds no code. */
const NO_USER_ID = '00000000-0000-0000-0000-000000000000';

/** Dependencies of {@link createPasswordResetService}. */
export interface PasswordResetDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly hasher: PasswordHasher;
  /** The one-time codes of every purpose; these are of purpose `password_reset`. */
  readonly codes: OneTimeCodes;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'passwordResetPerAddress' | 'passwordResetPerIp' | 'passwordResetConfirmPerIp'>;
  readonly log: FastifyBaseLogger;
  readonly metrics: AuthMetrics;
  /** ONE_TIME_CODE_TTL_SECONDS. */
  readonly codeTtlSeconds: number;
  /** Called after a commit that queued an email. */
  readonly onEmailQueued: () => void;
  /** The breached-password check of new passwords (PASSWORD_BREACH_CHECK=hibp), as at sign-up and change-password; undefined: none. */
  readonly breachedPasswords?: BreachedPasswordCheck | undefined;
}

/** Password reset by a 6-digit code sent to the account's email (docs/api.md#request-a-password-reset, docs/api.md#confirm-a-password-reset). */
export interface PasswordResetService {
  /**
   * Asks for a reset code for `email` (already normalised). Resolves (204) for every address,
   * known or not, verified or not, after the same work: the rate limits and one insert, a
   * `password_reset_request` row of the email outbox holding the address. The lookup of the user
   * and, for a known one, the new code (superseding older reset codes and cancelling their
   * queued emails) and its email are the outbox worker's ({@link handleRequest}), so the answer's
   * timing cannot tell who has an account (OWASP ASVS 5.0 V6.3.8), and the request survives a
   * crash or a database error (the worker's retries apply).
   * @throws AppError `auth.password_reset.rate_limited` (429, body code
   *   `auth.password_reset.too_many_attempts`, Retry-After) when the client is over
   *   RATE_LIMIT_PASSWORD_RESET_PER_IP requests this hour (counted first, so such a client does
   *   not also use up the address's request), or on a second request for the address within 60 s.
   */
  request(email: string, client: ClientContext): Promise<void>;
  /**
   * The work of a queued request, inside the outbox worker's transaction `tx`: for a known
   * address, issues the reset code and queues its email; for an unknown address, or a user
   * deleted meanwhile, nothing.
   * @returns true when a code was issued and its email queued; false when nothing was (the
   *   worker then marks the request `suppressed`, docs/operations.md).
   */
  handleRequest(tx: Queryable, email: string): Promise<boolean>;
  /**
   * Issues a reset code to `user`'s email and queues its email inside `tx`, as a request for
   * that address would (superseding older reset codes and cancelling their queued emails),
   * without the rate limits: the admin API's `password-reset` (docs/admin-api.md). The caller
   * nudges the outbox worker after commit.
   * @returns false when the user has no email or was deleted meanwhile: nothing was queued.
   */
  issueCode(tx: Queryable, user: { id: string; username: string; email: string | null }): Promise<boolean>;
  /**
   * Sets a new password with a reset code. The code is checked first (under its row lock; a
   * wrong one counts one of its 5 tries), then the password policy (a refused password leaves
   * the code usable), then, in one transaction: the code is consumed (of two parallel right
   * confirmations one wins, the other gets `code_expired`), the password replaced, every session
   * revoked, every outstanding reset code ended, the email marked verified, and a
   * `password_reset` notice queued, with the events of these changes (`password.changed`, a
   * `session.revoked` per session, `user.email_verified` when it was not; docs/api.md#event-types).
   * Nobody is signed in. Failed confirmations count against the
   * client (RATE_LIMIT_PASSWORD_RESET_CONFIRM_PER_IP per 15 minutes), never against the address,
   * so a stranger's wrong codes cannot stop the owner's right one beyond the 5 tries of a code.
   * @throws AppError `auth.password_reset.validation_failed` (400, the reason),
   *   `auth.password_reset.code_expired` / `code_mismatch` / `too_many_attempts` (410),
   *   `auth.password_reset.rate_limited` (429, Retry-After).
   */
  confirm(input: { email: string; code: string; newPassword: string }, client: ClientContext): Promise<void>;
}

/** Builds the {@link PasswordResetService}. */
export function createPasswordResetService(deps: PasswordResetDeps): PasswordResetService {
  const { db, clock, hasher, codes, limiter, rules, log, metrics, codeTtlSeconds, onEmailQueued } = deps;
  const credentialsChanges = createCredentialsChanges({ codes, metrics, log, onEmailQueued });

  const issueCode: PasswordResetService['issueCode'] = async (tx, user) => {
    if (user.email === null) return false;
    const target = { id: user.id, username: user.username, email: user.email };
    // False when the user was deleted since the lookup: nothing was queued either.
    return codes.issue(tx, { purpose: 'password_reset', user: target, ttlSeconds: codeTtlSeconds });
  };

  return {
    async request(email, client) {
      const { verdict } = await limiter.hitAll({
        first: { rule: rules.passwordResetPerIp, subject: client.ip ?? UNKNOWN_CLIENT },
        rule: rules.passwordResetPerAddress,
        subjects: [email],
      });
      if (!verdict.allowed) {
        securityEvent(log, 'password_reset.rate_limited', { ip: client.ip, reason: 'request' });
        throw tooManyAttempts('auth.password_reset.rate_limited', verdict.retryAfterSeconds);
      }
      metrics.passwordReset('requested');
      // One durable row for every address, known or not: the same statement either way.
      const now = clock.now();
      await enqueueEmail(db, {
        id: newTimeOrderedId(),
        kind: 'password_reset_request',
        recipient: email,
        payload: {},
        now,
        expiresAt: new Date(now.getTime() + codeTtlSeconds * 1000),
      });
      onEmailQueued();
    },

    async handleRequest(tx, email) {
      const user = await findUserByEmail(tx, email);
      return user === undefined ? false : issueCode(tx, user);
    },

    issueCode,

    async confirm(input, client) {
      const ip = client.ip ?? UNKNOWN_CLIENT;
      const newPassword = normalizePassword(input.newPassword);
      if (newPassword === undefined) {
        throw new AppError('auth.password_reset.validation_failed', { message: 'new_password must be 8 to 72 characters after NFKC normalisation.' });
      }
      await limiter.enforce(rules.passwordResetConfirmPerIp, ip, 'auth.password_reset.rate_limited', () =>
        securityEvent(log, 'password_reset.rate_limited', { ip: client.ip, reason: 'confirm' }),
      );
      const user = await findUserByEmail(db, input.email);
      if (user === undefined || user.email === null) {
        // The same locked lookup as a known address without a live code, so both 410s take alike.
        await db.transaction((tx) => codes.check(tx, { purpose: 'password_reset', userId: NO_USER_ID, email: input.email, code: input.code }));
        throw new AppError('auth.password_reset.code_expired');
      }
      const email = user.email;
      // The code first, under its row lock: a wrong one commits its counted try.
      const checked = await db.transaction((tx) => codes.check(tx, { purpose: 'password_reset', userId: user.id, email, code: input.code }));
      const failure: Record<Exclude<typeof checked.outcome, 'right'>, ErrorCode> = {
        none: 'auth.password_reset.code_expired',
        dead: 'auth.password_reset.too_many_attempts',
        wrong: 'auth.password_reset.code_mismatch',
      };
      if (checked.outcome !== 'right') throw new AppError(failure[checked.outcome]);
      // A refused password is no failed guess, and leaves the code usable.
      const refused = await checkPassword(newPassword, { username: user.username, email, serviceName: SERVICE_NAME }, { breached: deps.breachedPasswords });
      if (refused !== undefined) {
        await limiter.forgive(rules.passwordResetConfirmPerIp, ip);
        throw new AppError('auth.password_reset.validation_failed', { message: refused.reason });
      }
      // argon2id outside any transaction.
      const newHash = await hasher.hash(newPassword);
      const now = clock.now();
      const changed = await db.transaction(async (tx) => {
        // The user row first, then the code: the order of change-password and account deletion.
        if (!(await lockUser(tx, user.id))) return undefined;
        if (!(await codes.consume(tx, checked.codeId))) return undefined;
        await setPasswordHash(tx, user.id, newHash, now);
        // Passkeys survive a reset: the notice lists them, so a passkey an intruder added is seen (docs/security.md).
        const details = passkeyNoticeLines(await listPasskeys(tx, user.id));
        // The code proved the address: the notice goes to it, which is marked verified below.
        const revoked = await credentialsChanges.revoke(tx, { cause: 'password_reset', user: { ...user, email, is_email_verified: true }, now, client, details });
        const verified = await markEmailVerified(tx, user.id, email, now);
        if (verified !== undefined) await recordEvent(tx, { type: 'user.email_verified', data: { user: toUser(verified) } }, now);
        return revoked;
      });
      if (changed === undefined) throw new AppError('auth.password_reset.code_expired');
      await limiter.forgive(rules.passwordResetConfirmPerIp, ip);
      metrics.passwordReset('completed');
      credentialsChanges.announce(changed);
    },

  };
}
