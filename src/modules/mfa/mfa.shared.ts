/**
 * What other modules may use of the second-factor tables: a user's TOTP (read and removed by an
 * operator) and the sign-in's MFA challenge, in the caller's transaction `q`. The statements stay
 * in mfa.repo.ts, private to this module.
 */
export { deleteTotp, findTotp, insertChallenge, type TotpRow } from './mfa.repo.js';
