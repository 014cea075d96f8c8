/**
 * What other modules may use of the `passkeys` table: a user's passkeys (a password reset names
 * them in its notice). The statements stay in passkeys.repo.ts, private to this module.
 */
export { listPasskeys, type PasskeyRow } from './passkeys.repo.js';
