import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { eraseAccountIn } from '../accounts/accounts.service.js';
import type { DeletedUser } from '../accounts/accounts.shared.js';
import type { ClientContext } from '../../plugins/client-context.js';
import { revokeActiveSessions } from '../sessions/sessions.shared.js';
import { lockUser } from '../users/users.shared.js';
import type { ChangeOptions } from '../webhooks/webhooks.service.js';
import { recordAdminAudit, type AuditActor, type AuditDetails } from './admin-audit.repo.js';

/** The audit actor of an operator command (`latchkey users delete`, `latchkey sessions revoke`, `latchkey webhooks`). */
export { CLI_ACTOR } from './admin-audit.repo.js';

/*
 * The operations that the admin API and the operator commands share, one implementation each:
 * the API's service (admin-users.service.ts) and the CLI (`latchkey users delete`,
 * `latchkey sessions revoke`) call these, with the API key or CLI_ACTOR as the actor.
 */

/** Where an operator's change comes from, as a security notice tells it: no network address, no user agent ("an operator of the service"). */
export const OPERATOR_CLIENT: ClientContext = Object.freeze({ ip: null, userAgent: null });

/**
 * Deletes the account `userId` as its owner's deletion does (docs/api.md#delete-account: the
 * user, its sessions, codes, second factor and passkeys, its queued emails cancelled, a notice
 * to its verified address from "an operator of the service") and records `user.delete` in the
 * same transaction. One implementation for `DELETE /admin/v0/users/{user_id}` and
 * `latchkey users delete` (actor `CLI_ACTOR`, admin-audit.repo.ts).
 * @returns the deleted user, or undefined when there is no such user (nothing recorded).
 */
export async function deleteUserAccount(db: Db, actor: AuditActor, userId: string, now: Date): Promise<{ user: DeletedUser; noticeQueued: boolean } | undefined> {
  return db.transaction(async (tx) => {
    const erased = await eraseAccountIn(tx, { userId, now, client: OPERATOR_CLIENT, cause: 'operator' });
    if (erased !== undefined) await recordAdminAudit(tx, actor, { action: 'user.delete', userId, details: { username: erased.user.username } }, now);
    return erased;
  });
}

/**
 * Revokes every active session of user `userId` (`revoked_reason = 'revoked_by_admin'`; its
 * refresh tokens and, at this service, access tokens stop working at once) and records
 * `sessions.revoke_all` in the same transaction when it revoked any. One implementation for
 * `DELETE /admin/v0/users/{user_id}/sessions` and `latchkey sessions revoke`.
 * @returns how many sessions it revoked, or undefined when there is no such user.
 */
export async function revokeUserSessions(db: Db, actor: AuditActor, userId: string, now: Date): Promise<number | undefined> {
  return db.transaction(async (tx) => {
    if (!(await lockUser(tx, userId))) return undefined;
    const count = await revokeActiveSessions(tx, userId, 'revoked_by_admin', now);
    if (count > 0) await recordAdminAudit(tx, actor, { action: 'sessions.revoke_all', userId, details: { sessions_revoked: count } }, now);
    return count;
  });
}

/**
 * The {@link ChangeOptions} of a webhook change made by `actor` (an admin API key, or
 * `CLI_ACTOR` for `latchkey webhooks`): each change the webhook service makes is recorded in the
 * audit log inside its transaction, with its action, no user, and its details (never a secret),
 * at `clock.now()`. One implementation for the `/admin/v0/webhooks` routes and the CLI.
 */
export function auditedAs(actor: AuditActor, clock: Clock): ChangeOptions {
  return {
    audit: async (tx, change) => {
      await recordAdminAudit(tx, actor, { action: change.action, userId: null, details: change.details as AuditDetails }, clock.now());
    },
  };
}
