import type { FastifyReply } from 'fastify';

/** Cookie name (docs/api.md#refresh-cookie). */
export const REFRESH_COOKIE = 'refresh_token';
/** Cookie path: the browser sends the refresh token to the refresh endpoint only (docs/api.md#refresh-cookie). */
export const REFRESH_COOKIE_PATH = '/auth/v0/refresh';
/** The sign-in challenge cookie of a user with a second factor (docs/api.md#sign-in-second-step). */
export const MFA_CHALLENGE_COOKIE = 'mfa_challenge';
/** Its path: the browser sends it to the second step only. */
export const MFA_CHALLENGE_COOKIE_PATH = '/auth/v0/sign-in/mfa';

/** The passkey sign-in challenge cookie (docs/api.md#sign-in-with-a-passkey). */
export const WEBAUTHN_CHALLENGE_COOKIE = 'webauthn_challenge';
/** Its path: the browser sends it to the passkey sign-in routes only (the options route sets it). */
export const WEBAUTHN_CHALLENGE_COOKIE_PATH = '/auth/v0/sign-in/passkey';

/** The cookie that binds an identity provider's flow to the browser that started it (docs/api.md#authorize). */
export const OAUTH_FLOW_COOKIE = 'oauth_flow';
/** Its path: the browser sends it to the provider routes (the callback reads it). */
export const OAUTH_FLOW_COOKIE_PATH = '/auth/v0/oauth';

/**
 * Setting and clearing one of the service's cookies: `HttpOnly; Secure; SameSite=Strict` (or
 * `Lax`) on its own path; cleared with an empty value, `Max-Age=0`, the same path and attributes.
 */
function cookie(name: string, path: string, sameSite: 'strict' | 'lax' = 'strict') {
  const attributes = { path, httpOnly: true, secure: true, sameSite } as const;
  return {
    set: (reply: FastifyReply, value: string, maxAgeSeconds: number): void => void reply.setCookie(name, value, { ...attributes, maxAge: maxAgeSeconds }),
    clear: (reply: FastifyReply): void => void reply.setCookie(name, '', { ...attributes, maxAge: 0 }),
  };
}

const refreshCookie = cookie(REFRESH_COOKIE, REFRESH_COOKIE_PATH);
const mfaChallengeCookie = cookie(MFA_CHALLENGE_COOKIE, MFA_CHALLENGE_COOKIE_PATH);
const webauthnChallengeCookie = cookie(WEBAUTHN_CHALLENGE_COOKIE, WEBAUTHN_CHALLENGE_COOKIE_PATH);
// Lax: the provider sends the browser back with a top-level GET from its own site, which a
// Strict cookie would not accompany.
const oauthFlowCookie = cookie(OAUTH_FLOW_COOKIE, OAUTH_FLOW_COOKIE_PATH, 'lax');

/** Sets the refresh cookie: `Path=/auth/v0/refresh; HttpOnly; Secure; SameSite=Strict; Max-Age=<session remaining>`. */
export const setRefreshCookie = refreshCookie.set;
/** The clearing cookie: empty value, `Max-Age=0`, same path and attributes (docs/api.md#refresh-cookie). */
export const clearRefreshCookie = refreshCookie.clear;
/** Sets `mfa_challenge=<value>; Path=/auth/v0/sign-in/mfa; HttpOnly; Secure; SameSite=Strict; Max-Age=<seconds>`. */
export const setMfaChallengeCookie = mfaChallengeCookie.set;
/** Clears the challenge cookie: empty value, `Max-Age=0`, same path and attributes. */
export const clearMfaChallengeCookie = mfaChallengeCookie.clear;
/** Sets `webauthn_challenge=<value>; Path=/auth/v0/sign-in/passkey; HttpOnly; Secure; SameSite=Strict; Max-Age=<seconds>`. */
export const setWebauthnChallengeCookie = webauthnChallengeCookie.set;
/** Clears the passkey challenge cookie: empty value, `Max-Age=0`, same path and attributes. */
export const clearWebauthnChallengeCookie = webauthnChallengeCookie.clear;
/** Sets `oauth_flow=<value>; Path=/auth/v0/oauth; HttpOnly; Secure; SameSite=Lax; Max-Age=<seconds>`. */
export const setOAuthFlowCookie = oauthFlowCookie.set;
/** Clears the flow cookie: empty value, `Max-Age=0`, same path and attributes. */
export const clearOAuthFlowCookie = oauthFlowCookie.clear;
