import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { AppError } from '../../errors.js';
import type { FastifyBaseLogger } from 'fastify';
import type { AccountDeletionCause, AuthMetrics } from '../../metrics.js';
import { securityEvent } from '../audit/security-events.js';
import { queueUserNotice } from '../mail/notices.js';
import type { ClientContext } from '../../plugins/client-context.js';
import { cancelEmailsTo, cancelPendingEmails } from '../mail/mail.shared.js';
import type { CurrentPasswordCheck } from '../users/current-password.js';
import type { Authenticated } from '../sessions/sessions.service.js';
import { deleteFinishedEmailsTo, deleteUser, type DeletedUser } from './accounts.repo.js';
import { deleteAccountWindows } from '../rate-limits/rate-limits.shared.js';
import { recordEvent, type UserDeletedCause } from '../events/events.shared.js';

/** The reason recorded on the outbox rows a deletion cancels. */
export const DELETED_ACCOUNT_REASON = 'account deleted';

/**
 * Deletes the account `userId` in one transaction (docs/api.md#delete-account): the user and
 * every row that belongs to it (codes, devices, sessions, refresh tokens), so its access tokens
 * answer 401 at the next request and its identifiers are free; deletes its per-account
 * rate-limit windows ({@link deleteAccountWindows}); cancels the emails queued to its address
 * and not yet sent ({@link cancelEmailsTo}) and deletes the finished ones
 * ({@link deleteFinishedEmailsTo}), and the code emails of its unconfirmed email changes; then queues the `account_deleted` notice to its verified
 * address (docs/api.md#security-notices), which keeps the address, the username, the time, IP
 * address and user agent, and no reference to the user, until the retention worker deletes it;
 * and records the `user.deleted` event with `d.cause`, the only event of a deletion
 * (docs/api.md#event-types). Shared by delete-account, the admin API and `latchkey users delete`
 * (through {@link eraseAccountIn}).
 * @param d.expectedPasswordVersion delete only while the password is this version (delete-account checked it).
 * @param d.cause who deleted it: `owner` (delete-account) or `operator`.
 * @param d.client where the request came from; nulls for an operator's command.
 * @returns the deleted user, or undefined when nothing was deleted (already gone, or the password changed).
 */
export async function eraseAccount(
  db: Db,
  d: { userId: string; expectedPasswordVersion?: number | undefined; now: Date; client: ClientContext; cause: Exclude<UserDeletedCause, 'unverified_expired'> },
): Promise<{ user: DeletedUser; noticeQueued: boolean } | undefined> {
  return db.transaction((tx) => eraseAccountIn(tx, d));
}

/**
 * {@link eraseAccount} inside the caller's open transaction `tx`, so that what records the
 * deletion (the admin API's audit entry) commits with it or not at all.
 */
export async function eraseAccountIn(
  tx: Queryable,
  d: { userId: string; expectedPasswordVersion?: number | undefined; now: Date; client: ClientContext; cause: Exclude<UserDeletedCause, 'unverified_expired'> },
): Promise<{ user: DeletedUser; noticeQueued: boolean } | undefined> {
  const user = await deleteUser(tx, d.userId, { expectedPasswordVersion: d.expectedPasswordVersion });
  if (user === undefined) return undefined;
  await deleteAccountWindows(tx, user.id);
  await recordEvent(tx, { type: 'user.deleted', data: { user_id: user.id, cause: d.cause } }, d.now);
  if (user.email !== null) {
    await cancelEmailsTo(tx, { recipient: user.email, reason: DELETED_ACCOUNT_REASON, now: d.now });
    await deleteFinishedEmailsTo(tx, user.email);
  }
  for (const recipient of user.pendingEmailChanges) {
    await cancelPendingEmails(tx, { kind: 'email_change', recipient, reason: DELETED_ACCOUNT_REASON, now: d.now });
  }
  const noticeQueued = await queueUserNotice(tx, user, { kind: 'account_deleted', at: d.now, client: d.client });
  return { user, noticeQueued };
}

/** Dependencies of {@link createAccountsService}. */
export interface AccountsDeps {
  readonly db: Db;
  readonly clock: Clock;
  /** The check of the current password, whose budget delete-account shares. */
  readonly currentPassword: CurrentPasswordCheck;
  readonly onEmailQueued: () => void;
  /** Counts deleted accounts. */
  readonly metrics: AccountsMetrics;
  readonly log: FastifyBaseLogger;
}

/** The part of {@link AuthMetrics} the accounts service counts. */
export type AccountsMetrics = Pick<AuthMetrics, 'accountsDeleted'>;

/** Account deletion by its owner. */
export interface AccountsService {
  /**
   * Deletes the account of `user` once `password` is its password (docs/api.md#delete-account).
   * The password is checked by the {@link CurrentPasswordCheck} (one budget per user with the
   * other operations that ask for it; a wrong one counts as a failed sign-in of the account).
   * Then {@link eraseAccount}, guarded by the version of the password that was checked: if the password changed or
   * the account was deleted meanwhile, nothing is deleted and the answer is 401. A deletion is
   * counted (`accountsDeleted('owner')`) and logged as the `account.deleted` security event.
   * @throws AppError `auth.invalid_current_password` (401), `auth.delete_account.too_many_attempts` (429, Retry-After).
   */
  deleteAccount(caller: Authenticated, input: { password: string | undefined }, client: ClientContext): Promise<void>;
}

/** Builds the {@link AccountsService}. */
export function createAccountsService(deps: AccountsDeps): AccountsService {
  const { db, clock, currentPassword, onEmailQueued, metrics, log } = deps;
  return {
    async deleteAccount(caller, input, client) {
      const { user } = caller;
      await currentPassword.verify(caller, input.password, {
        purpose: 'delete_account',
        ip: client.ip,
        tooMany: 'auth.delete_account.too_many_attempts',
        validationError: 'auth.delete_account.validation_failed',
      });
      const erased = await eraseAccount(db, { userId: user.id, expectedPasswordVersion: user.password_version, now: clock.now(), client, cause: 'owner' });
      if (erased === undefined) throw new AppError('auth.invalid_current_password');
      metrics.accountsDeleted('owner');
      if (erased.noticeQueued) onEmailQueued();
      securityEvent(log, 'account.deleted', { userId: user.id, sessionId: caller.session.id, ip: client.ip, reason: 'owner' });
    },
  };
}

export type { AccountDeletionCause };
