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
