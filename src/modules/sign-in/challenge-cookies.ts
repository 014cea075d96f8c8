import { serviceCookie } from '../../plugins/service-cookie.js';

/** The sign-in challenge cookie of a user with a second factor (docs/api.md#sign-in-second-step). */
export const MFA_CHALLENGE_COOKIE = 'mfa_challenge';
/** Its path: the browser sends it to the second step only. */
export const MFA_CHALLENGE_COOKIE_PATH = '/auth/v0/sign-in/mfa';

/** The passkey sign-in challenge cookie (docs/api.md#sign-in-with-a-passkey). */
export const WEBAUTHN_CHALLENGE_COOKIE = 'webauthn_challenge';
/** Its path: the browser sends it to the passkey sign-in routes only (the options route sets it). */
export const WEBAUTHN_CHALLENGE_COOKIE_PATH = '/auth/v0/sign-in/passkey';

const mfaChallengeCookie = serviceCookie(MFA_CHALLENGE_COOKIE, MFA_CHALLENGE_COOKIE_PATH);
const webauthnChallengeCookie = serviceCookie(WEBAUTHN_CHALLENGE_COOKIE, WEBAUTHN_CHALLENGE_COOKIE_PATH);

/** Sets `mfa_challenge=<value>; Path=/auth/v0/sign-in/mfa; HttpOnly; Secure; SameSite=Strict; Max-Age=<seconds>`. */
export const setMfaChallengeCookie = mfaChallengeCookie.set;
/** Clears the challenge cookie: empty value, `Max-Age=0`, same path and attributes. */
export const clearMfaChallengeCookie = mfaChallengeCookie.clear;
/** Sets `webauthn_challenge=<value>; Path=/auth/v0/sign-in/passkey; HttpOnly; Secure; SameSite=Strict; Max-Age=<seconds>`. */
export const setWebauthnChallengeCookie = webauthnChallengeCookie.set;
/** Clears the passkey challenge cookie: empty value, `Max-Age=0`, same path and attributes. */
export const clearWebauthnChallengeCookie = webauthnChallengeCookie.clear;
