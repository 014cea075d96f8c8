import type { Clock } from '../../clock.js';
import type { Queryable } from '../../db/db.js';
import { constantTimeEqual, hmacSha256, newVerificationCode } from '../../crypto/secrets.js';
import { cancelPendingEmails, enqueueEmail } from '../mail/mail.shared.js';
import { consumeCode, lockLiveCode, recordWrongAttempt, replaceCode, supersedeCodes, type CodePurpose } from './one-time-codes.repo.js';
import { newTimeOrderedId } from '../../crypto/ids.js';

export type { CodePurpose } from './one-time-codes.repo.js';

/** Wrong attempts after which a code is dead, whatever its purpose (docs/api.md#one-time-codes). */
export const MAX_CODE_ATTEMPTS = 5;

/** The outcome of {@link OneTimeCodes.check}: the right code (still live, not consumed yet), or why not. */
export type CodeCheck =
  | { readonly outcome: 'right'; readonly codeId: string; /** The address the code was sent to. */ readonly email: string }
  /** `none`: no live code (never issued, expired, superseded or consumed); `dead`: 5 wrong tries; `wrong`: a try counted. */
  | { readonly outcome: 'none' | 'dead' | 'wrong' };

/** Dependencies of {@link createOneTimeCodes}. */
export interface OneTimeCodesDeps {
  readonly clock: Clock;
  /** HMAC-SHA-256 key of the codes at rest (docs/decisions.md, "One-time codes"). */
  readonly codeHmacKey: Buffer;
}

/**
 * One mechanism for the one-time codes of every purpose (docs/api.md#one-time-codes): 6 digits
 * from the CSPRNG, stored only as HMAC-SHA-256 of `<id>:<code>` under a server key, bound to a
 * purpose, valid for a TTL, at most {@link MAX_CODE_ATTEMPTS} wrong tries counted under a row
 * lock, superseded by a newer code of the same purpose, consumed by one guarded UPDATE (OWASP ASVS 5.0 V6.6.3, NIST SP 800-63B-4 §3.1.3). Every function runs inside the
 * caller's transaction.
 */
export interface OneTimeCodes {
  /**
   * Issues a code of `purpose` to `recipient` (default `user.email`, the user's own address; an
   * email change sends it to the new address): supersedes the user's older codes of that
   * purpose, cancels their emails still waiting in the outbox (outbox kind = purpose, to the new
   * recipient and to the addresses of the superseded codes; one being sent right now is made to
   * expire, so a failed attempt is not retried after the newer email), stores the new code's
   * HMAC bound to `recipient` and queues its email, so all commit together. Does nothing when
   * the user was deleted (or its address is no longer `user.email`) since the caller looked it up.
   * @returns false when there is no such user any more, or no address to send to (no code, no email).
   */
  issue(
    tx: Queryable,
    c: { purpose: CodePurpose; user: { id: string; username: string; email: string | null }; recipient?: string; ttlSeconds: number },
  ): Promise<boolean>;
  /**
   * Compares `code` with the user's live code of `purpose` for `email` (null: the latest live
   * code whatever its address, as an email change's confirmation names none), holding its row
   * lock until `tx` ends: a wrong code counts a try (committed with `tx`), a right one is left
   * live for {@link consume}. Parallel checks of one code serialise on the lock.
   */
  check(tx: Queryable, c: { purpose: CodePurpose; userId: string; email: string | null; code: string }): Promise<CodeCheck>;
  /** Consumes a code found right by {@link check}. @returns true for the one caller that consumed it (a race's winner). */
  consume(tx: Queryable, codeId: string): Promise<boolean>;
  /**
   * Ends every live code of the user for `purpose` (a password change kills outstanding reset
   * codes) and cancels their emails still waiting in the outbox, to `user.email` and to the
   * addresses of the ended codes (as {@link issue}).
   * @returns how many codes it ended.
   */
  revokeAll(tx: Queryable, purpose: CodePurpose, user: { id: string; email: string | null }): Promise<number>;
}

/** Builds {@link OneTimeCodes} over the clock and the HMAC key. */
export function createOneTimeCodes(deps: OneTimeCodesDeps): OneTimeCodes {
  const { clock, codeHmacKey } = deps;
  const hashCode = (codeId: string, code: string): string => hmacSha256(codeHmacKey, `${codeId}:${code}`);
  return {
    async issue(tx, { purpose, user, recipient = user.email ?? undefined, ttlSeconds }) {
      if (recipient === undefined) return false;
      const now = clock.now();
      const code = newVerificationCode();
      const id = newTimeOrderedId();
      const expiresAt = new Date(now.getTime() + ttlSeconds * 1000);
      const superseded = await replaceCode(tx, { id, purpose, userId: user.id, userEmail: user.email, email: recipient, codeHash: hashCode(id, code), now, expiresAt });
      if (superseded === undefined) return false;
      await cancelCodeEmails(tx, purpose, [recipient, ...superseded], 'superseded by a newer code', now);
      await enqueueEmail(tx, { id: newTimeOrderedId(), kind: purpose, recipient, payload: { username: user.username, code }, now, expiresAt });
      return true;
    },

    async check(tx, { purpose, userId, email, code }) {
      const live = await lockLiveCode(tx, { purpose, userId, email, now: clock.now() });
      if (live === undefined) return { outcome: 'none' };
      if (live.attempts >= MAX_CODE_ATTEMPTS) return { outcome: 'dead' };
      if (!constantTimeEqual(hashCode(live.id, code), live.code_hash)) {
        const attempts = await recordWrongAttempt(tx, live.id);
        return { outcome: attempts >= MAX_CODE_ATTEMPTS ? 'dead' : 'wrong' };
      }
      return { outcome: 'right', codeId: live.id, email: live.email };
    },

    consume: (tx, codeId) => consumeCode(tx, codeId, clock.now()),

    async revokeAll(tx, purpose, user) {
      const now = clock.now();
      const ended = await supersedeCodes(tx, { purpose, userId: user.id, now });
      await cancelCodeEmails(tx, purpose, user.email === null ? ended : [user.email, ...ended], 'its code was revoked', now);
      return ended.length;
    },
  };
}

/** Cancels the queued emails of `purpose` to each of `recipients` (duplicates ignored). */
async function cancelCodeEmails(tx: Queryable, purpose: CodePurpose, recipients: readonly string[], reason: string, now: Date): Promise<void> {
  for (const recipient of new Set(recipients)) await cancelPendingEmails(tx, { kind: purpose, recipient, reason, now });
}
