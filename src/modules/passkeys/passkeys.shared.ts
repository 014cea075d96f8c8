/**
 * What other modules may use of the `passkeys` table: a user's passkeys (a password reset names
 * them in its notice), and the SELECT of a credential with its owner that a passkey sign-in
 * runs inside its counting statement (sign-in.repo.ts). The statements stay in passkeys.repo.ts,
 * private to this module.
 */
export { listPasskeys, passkeyWithOwnerSql, type PasskeyRow, type PasskeyWithOwner } from './passkeys.repo.js';
