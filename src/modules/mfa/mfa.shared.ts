/**
 * What other modules may use of the second-factor tables: a user's TOTP (read and removed by an
 * operator), in the caller's transaction `q`. The statements stay in mfa.repo.ts, private to this
 * module; the second step of a sign-in checks a code through MfaService.verifySignInCode.
 */
export { deleteTotp, findTotp, type TotpRow } from './mfa.repo.js';
