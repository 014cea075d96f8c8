import type { FastifyReply } from 'fastify';

/** Cookie name (docs/api.md#refresh-cookie). */
export const REFRESH_COOKIE = 'refresh_token';
/** Cookie path: the browser sends the refresh token to the refresh endpoint only (docs/api.md#refresh-cookie). */
export const REFRESH_COOKIE_PATH = '/auth/v0/refresh';

const ATTRIBUTES = { path: REFRESH_COOKIE_PATH, httpOnly: true, secure: true, sameSite: 'strict' } as const;

/** Sets the refresh cookie: `Path=/auth/v0/refresh; HttpOnly; Secure; SameSite=Strict; Max-Age=<session remaining>`. */
export function setRefreshCookie(reply: FastifyReply, token: string, maxAgeSeconds: number): void {
  reply.setCookie(REFRESH_COOKIE, token, { ...ATTRIBUTES, maxAge: maxAgeSeconds });
}

/** The clearing cookie: empty value, `Max-Age=0`, same path and attributes (docs/api.md#refresh-cookie). */
export function clearRefreshCookie(reply: FastifyReply): void {
  reply.setCookie(REFRESH_COOKIE, '', { ...ATTRIBUTES, maxAge: 0 });
}

/** The sign-in challenge cookie of a user with a second factor (docs/api.md#sign-in-second-step). */
export const MFA_CHALLENGE_COOKIE = 'mfa_challenge';
/** Its path: the browser sends it to the second step only. */
export const MFA_CHALLENGE_COOKIE_PATH = '/auth/v0/sign-in/mfa';

const MFA_ATTRIBUTES = { path: MFA_CHALLENGE_COOKIE_PATH, httpOnly: true, secure: true, sameSite: 'strict' } as const;

/** Sets `mfa_challenge=<value>; Path=/auth/v0/sign-in/mfa; HttpOnly; Secure; SameSite=Strict; Max-Age=<seconds>`. */
export function setMfaChallengeCookie(reply: FastifyReply, value: string, maxAgeSeconds: number): void {
  reply.setCookie(MFA_CHALLENGE_COOKIE, value, { ...MFA_ATTRIBUTES, maxAge: maxAgeSeconds });
}

/** Clears the challenge cookie: empty value, `Max-Age=0`, same path and attributes. */
export function clearMfaChallengeCookie(reply: FastifyReply): void {
  reply.setCookie(MFA_CHALLENGE_COOKIE, '', { ...MFA_ATTRIBUTES, maxAge: 0 });
}
