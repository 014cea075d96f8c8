import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { AppError } from '../../errors.js';
import { securityEvent } from '../audit/security-events.js';
import { queueUserNotice } from '../mail/notices.js';
import { MFA_FAILURE_NOTICE_THRESHOLD, type RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import { tooManyAttempts, type RateLimiter } from '../rate-limits/rate-limits.service.js';
import type { ClientContext } from '../../plugins/client-context.js';
import type { Authenticated } from '../sessions/sessions.service.js';
import { findUserById, type UserRow } from '../users/users.shared.js';
import type { CurrentPasswordCheck } from '../users/current-password.js';
import {
  acceptTotpStep,
  deleteTotp,
  enableTotp,
  findTotp,
  replaceRecoveryCodes,
  storePendingTotp,
  useRecoveryCode,
} from './mfa.repo.js';
import { matchTotp, newRecoveryCodes, newTotpSecret, otpauthUri, recoveryCodeHash } from './totp.js';
import { openSecret, sealSecret } from '../../crypto/sealed-secret.js';
import { recordEvent } from '../events/events.shared.js';

/** Dependencies of {@link createMfaService}. */
export interface MfaDeps {
  readonly db: Db;
  readonly clock: Clock;
  /** The check of the current password (setup, disable, regeneration), whose budget these share with the other operations that ask for it. */
  readonly currentPassword: CurrentPasswordCheck;
  /** AES-256-GCM key of TOTP secrets and HMAC key of recovery codes (KeyStore.mfa). */
  readonly keys: { readonly totpSecretKey: Buffer; readonly recoveryCodeKey: Buffer };
  /** TOTP_ISSUER. */
  readonly issuer: string;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'mfaManagePerUser' | 'mfaSignInPerAccount' | 'mfaFailureNoticePerAccount'>;
  readonly log: FastifyBaseLogger;
  readonly onEmailQueued: () => void;
}

/** A second factor as a request gives it: a TOTP code, or a recovery code. */
export type SecondFactor = { readonly code: string } | { readonly recoveryCode: string };

/**
 * The second factor: TOTP (RFC 6238) with recovery codes (docs/api.md#second-factor): enrolment,
 * management, and the check of a code that the second step of a sign-in
 * (docs/api.md#sign-in-second-step, sign-in.service.ts) asks for. OWASP ASVS 5.0 V6.5 and V6.6;
 * NIST SP 800-63B-4 §3.1.4 (single-factor OTP) and §3.2.2 (rate limiting).
 */
export interface MfaService {
  /**
   * Starts TOTP for `user`: checks the password (CurrentPasswordCheck), then stores a new 160-bit secret, encrypted,
   * not yet enabled (replacing an earlier setup never enabled). Nothing changes for sign-in.
   * @returns the base32 secret and its `otpauth://` URI, shown once.
   * @throws AppError `auth.invalid_current_password` (401), `auth.mfa.already_enabled` (409),
   *   `auth.mfa.too_many_attempts` (429, Retry-After).
   */
  setup(caller: Authenticated, input: { password?: string | undefined }, client: ClientContext): Promise<{ secret: string; otpauthUri: string }>;
  /**
   * Turns TOTP on with a code of the secret from {@link setup}; stores 10 new recovery codes
   * (hashed), queues an `mfa_enabled` notice and records the `mfa.enabled` event
   * (docs/api.md#event-types), in one transaction. The caller's session stays.
   * @returns the recovery codes, shown once.
   * @throws AppError `auth.mfa.validation_failed` (400: no setup), `auth.mfa.invalid_code` (401),
   *   `auth.mfa.already_enabled` (409), `auth.mfa.too_many_attempts` (429).
   */
  enable(user: UserRow, input: { code: string }, client: ClientContext): Promise<string[]>;
  /**
   * Turns TOTP off with the password (CurrentPasswordCheck) and a code (TOTP or recovery code);
   * deletes the secret and the recovery codes, queues an `mfa_disabled` notice and records the
   * `mfa.disabled` event, in one transaction. The code counts under the account's second-factor limit, as at sign-in: a
   * wrong one is logged as `mfa.failed` and may send the `mfa_codes_failing` notice.
   * @throws AppError `auth.mfa.validation_failed` (400: not enabled), `auth.invalid_current_password`
   *   (401), `auth.mfa.invalid_code` (401), `auth.mfa.too_many_attempts` (429).
   */
  disable(caller: Authenticated, input: { password?: string | undefined; code: string }, client: ClientContext): Promise<void>;
  /**
   * Replaces the recovery codes (the old set dies), with the password and a code (TOTP or
   * recovery code); queues a `recovery_codes_regenerated` notice.
   * @returns the new codes, shown once.
   * @throws as {@link disable}.
   */
  regenerateRecoveryCodes(caller: Authenticated, input: { password?: string | undefined; code: string }, client: ClientContext): Promise<string[]>;
  /**
   * Checks a second factor of `userId` at the second step of a sign-in (sign-in.service.ts),
   * inside the caller's transaction `tx`, and uses it up: a TOTP code's time step is accepted
   * once, never again; a recovery code is marked used. The authenticator must be enabled.
   * @returns which factor it was, or undefined for a wrong, replayed or used one, or when the
   *   user has no second factor on.
   */
  verifySignInCode(tx: Queryable, userId: string, factor: SecondFactor): Promise<'totp' | 'recovery_code' | undefined>;
  /**
   * After a wrong second-factor code of `userId`, given the `failures` its account has in the
   * current window of the second-factor limit (this one included): from the
   * {@link MFA_FAILURE_NOTICE_THRESHOLD}th on, the owner is told that someone who has the
   * password is trying codes, once a day at most (`mfaFailureNoticePerAccount`). Never throws: a
   * notice that cannot be queued is logged. NIST SP 800-63B-4 §3.2.2 (rate limiting), OWASP ASVS
   * 5.0 V6.3.5 (the user is told of suspicious authentication attempts).
   */
  reportWrongCode(userId: string, failures: number | undefined, client: ClientContext): Promise<void>;
}

/** Builds the {@link MfaService}. */
export function createMfaService(deps: MfaDeps): MfaService {
  const { db, clock, currentPassword, keys, issuer, limiter, rules, log, onEmailQueued } = deps;

  const tooMany = (retryAfterSeconds: number): AppError => tooManyAttempts('auth.mfa.too_many_attempts', retryAfterSeconds);

  /** Counts an attempt to enable before the code is checked; only a success takes it back. */
  const countManageAttempt = (user: UserRow): Promise<void> => limiter.enforce(rules.mfaManagePerUser, user.id, 'auth.mfa.too_many_attempts');

  /** {@link MfaService.reportWrongCode}. */
  const afterWrongCode = async (userId: string, failures: number | undefined, client: ClientContext): Promise<void> => {
    // A limit below the threshold refuses before the threshold is reached: the notice goes at the limit then.
    const threshold = Math.min(MFA_FAILURE_NOTICE_THRESHOLD, rules.mfaSignInPerAccount.limit);
    if (failures === undefined || failures < threshold) return;
    try {
      if (!(await limiter.hit(rules.mfaFailureNoticePerAccount, userId)).allowed) return;
      const user = await findUserById(db, userId);
      if (user === undefined || !(await queueUserNotice(db, user, { kind: 'mfa_codes_failing', at: clock.now(), client }))) return;
      onEmailQueued();
      securityEvent(log, 'mfa.codes_failing_notice', { userId, ip: client.ip });
    } catch (err) {
      // The wrong code is still answered as one; the failure to warn the owner is the operator's to see.
      log.error({ err, userId }, 'the mfa_codes_failing notice could not be queued');
    }
  };

  const nowSeconds = (): number => Math.floor(clock.now().getTime() / 1000);

  /**
   * Checks a second factor of `userId` inside `tx` and uses it up: a TOTP code's time step is
   * accepted once (`enabled`: the authenticator must be enabled, or still pending for enable),
   * a recovery code is marked used. `code` may hold either (disable, regeneration).
   * @returns which factor it was, or undefined for a wrong, replayed or used one.
   */
  const useSecondFactor = async (
    tx: Queryable,
    c: { userId: string; sealedSecret: string; factor: SecondFactor; enabled: boolean },
  ): Promise<'totp' | 'recovery_code' | undefined> => {
    const typed = 'code' in c.factor ? c.factor.code : c.factor.recoveryCode;
    if ('code' in c.factor && /^[0-9]{6}$/.test(typed)) {
      const secret = openSecret(keys.totpSecretKey, c.userId, c.sealedSecret);
      if (secret === undefined) {
        log.error({ userId: c.userId }, 'a TOTP secret does not decrypt: MFA_KEY_FILE is not the key it was stored under');
        return undefined;
      }
      const step = await matchTotp(secret, typed, nowSeconds());
      return step !== undefined && (await acceptTotpStep(tx, { userId: c.userId, step, enabled: c.enabled })) ? 'totp' : undefined;
    }
    if (!c.enabled) return undefined;
    const hash = recoveryCodeHash(keys.recoveryCodeKey, c.userId, typed);
    return hash !== undefined && (await useRecoveryCode(tx, { userId: c.userId, hash, now: clock.now() })) ? 'recovery_code' : undefined;
  };


  /** New recovery codes for `userId`, stored hashed in `tx`; returns them in the clear, once. */
  const storeNewRecoveryCodes = async (tx: Queryable, userId: string): Promise<string[]> => {
    const codes = newRecoveryCodes();
    await replaceRecoveryCodes(tx, { userId, hashes: codes.map((code) => recoveryCodeHash(keys.recoveryCodeKey, userId, code)!), now: clock.now() });
    return codes;
  };

  /**
   * Disable and regeneration: the password (`purpose`, CurrentPasswordCheck), then a code,
   * counted under the account's second-factor limit before it is checked (under the
   * authenticator's row lock), then `change` in the same transaction; a success takes the
   * code's count back, a wrong code is logged and may notify the owner ({@link afterWrongCode}).
   */
  const withPasswordAndCode = async <T>(
    caller: Authenticated,
    input: { password?: string | undefined; code: string },
    c: { purpose: 'mfa_disable' | 'mfa_recovery_codes'; client: ClientContext },
    change: (tx: Queryable) => Promise<T>,
  ): Promise<T> => {
    const { user } = caller;
    await currentPassword.verify(caller, input.password, { purpose: c.purpose, ip: c.client.ip, tooMany: 'auth.mfa.too_many_attempts', validationError: 'auth.mfa.validation_failed' });
    const counted = await limiter.hitAll({ rule: rules.mfaSignInPerAccount, subjects: [user.id] });
    if (!counted.verdict.allowed) {
      securityEvent(log, 'mfa.rate_limited', { userId: user.id, ip: c.client.ip, reason: c.purpose });
      throw tooMany(counted.verdict.retryAfterSeconds);
    }
    const outcome = await db.transaction(async (tx): Promise<{ failure: 'not_enabled' | 'invalid_code' } | { value: T }> => {
      const totp = await findTotp(tx, user.id, { lock: true });
      if (totp?.enabled_at == null) return { failure: 'not_enabled' };
      const used = await useSecondFactor(tx, { userId: user.id, sealedSecret: totp.secret, factor: { code: input.code }, enabled: true });
      // A wrong code changes nothing; a replayed one neither.
      if (used === undefined) return { failure: 'invalid_code' };
      return { value: await change(tx) };
    });
    if ('failure' in outcome) {
      if (outcome.failure === 'not_enabled') {
        await limiter.forgiveKeys(counted.keys);
        throw new AppError('auth.mfa.validation_failed', { message: 'no second factor is enabled.' });
      }
      securityEvent(log, 'mfa.failed', { userId: user.id, ip: c.client.ip, reason: c.purpose });
      await afterWrongCode(user.id, counted.batchHits[0], c.client);
      throw new AppError('auth.mfa.invalid_code');
    }
    await limiter.forgiveKeys(counted.keys);
    return outcome.value;
  };

  return {
    async setup(caller, input, client) {
      const { user } = caller;
      await currentPassword.verify(caller, input.password, { purpose: 'mfa_setup', ip: client.ip, tooMany: 'auth.mfa.too_many_attempts', validationError: 'auth.mfa.validation_failed' });
      const secret = newTotpSecret();
      if (!(await storePendingTotp(db, { userId: user.id, secret: sealSecret(keys.totpSecretKey, user.id, secret), now: clock.now() }))) {
        throw new AppError('auth.mfa.already_enabled');
      }
      return { secret, otpauthUri: otpauthUri({ issuer, account: user.email ?? user.username, secret }) };
    },

    async enable(user, input, client) {
      await countManageAttempt(user);
      const outcome = await db.transaction(async (tx): Promise<{ failure: 'no_setup' | 'enabled' | 'invalid_code' } | { codes: string[]; noticed: boolean }> => {
        const totp = await findTotp(tx, user.id, { lock: true });
        if (totp === undefined) return { failure: 'no_setup' };
        if (totp.enabled_at !== null) return { failure: 'enabled' };
        if ((await useSecondFactor(tx, { userId: user.id, sealedSecret: totp.secret, factor: { code: input.code }, enabled: false })) === undefined) {
          return { failure: 'invalid_code' };
        }
        await enableTotp(tx, user.id, clock.now());
        await recordEvent(tx, { type: 'mfa.enabled', data: { user_id: user.id } }, clock.now());
        const codes = await storeNewRecoveryCodes(tx, user.id);
        return { codes, noticed: await queueUserNotice(tx, user, { kind: 'mfa_enabled', at: clock.now(), client }) };
      });
      if ('failure' in outcome) {
        if (outcome.failure === 'no_setup') throw new AppError('auth.mfa.validation_failed', { message: 'call /auth/v0/mfa/totp/setup first.' });
        if (outcome.failure === 'enabled') throw new AppError('auth.mfa.already_enabled');
        throw new AppError('auth.mfa.invalid_code');
      }
      await limiter.forgive(rules.mfaManagePerUser, user.id);
      if (outcome.noticed) onEmailQueued();
      securityEvent(log, 'mfa.enabled', { userId: user.id, ip: client.ip });
      return outcome.codes;
    },

    async disable(caller, input, client) {
      const { user } = caller;
      const noticed = await withPasswordAndCode(caller, input, { purpose: 'mfa_disable', client }, async (tx) => {
        await deleteTotp(tx, user.id);
        await recordEvent(tx, { type: 'mfa.disabled', data: { user_id: user.id } }, clock.now());
        return queueUserNotice(tx, user, { kind: 'mfa_disabled', at: clock.now(), client });
      });
      if (noticed) onEmailQueued();
      securityEvent(log, 'mfa.disabled', { userId: user.id, ip: client.ip });
    },

    async regenerateRecoveryCodes(caller, input, client) {
      const { user } = caller;
      const { codes, noticed } = await withPasswordAndCode(caller, input, { purpose: 'mfa_recovery_codes', client }, async (tx) => ({
        codes: await storeNewRecoveryCodes(tx, user.id),
        noticed: await queueUserNotice(tx, user, { kind: 'recovery_codes_regenerated', at: clock.now(), client }),
      }));
      if (noticed) onEmailQueued();
      securityEvent(log, 'mfa.recovery_codes_regenerated', { userId: user.id, ip: client.ip });
      return codes;
    },

    reportWrongCode: afterWrongCode,

    async verifySignInCode(tx, userId, factor) {
      const totp = await findTotp(tx, userId);
      return totp?.enabled_at == null ? undefined : useSecondFactor(tx, { userId, sealedSecret: totp.secret, factor, enabled: true });
    },
  };
}
