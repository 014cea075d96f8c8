/**
 * What other modules may use of account deletion's statements: what is left of a deleted user,
 * and the batched deletion of unverified accounts that expired
 * (docs/api.md#unverified-accounts-expire), run by the retention worker. The statements stay in
 * accounts.repo.ts, private to this module.
 */
export { deleteExpiredUnverifiedUsers, type DeletedUser } from './accounts.repo.js';
