import type { FastifyReply } from 'fastify';

/** Cookie name (spec §5). */
export const REFRESH_COOKIE = 'refresh_token';
/** Cookie path: the browser sends the refresh token to the refresh endpoint only (spec §5 rule 2). */
export const REFRESH_COOKIE_PATH = '/auth/v0/refresh';

const ATTRIBUTES = { path: REFRESH_COOKIE_PATH, httpOnly: true, secure: true, sameSite: 'strict' } as const;

/** Sets the refresh cookie: `Path=/auth/v0/refresh; HttpOnly; Secure; SameSite=Strict; Max-Age=<session remaining>`. */
export function setRefreshCookie(reply: FastifyReply, token: string, maxAgeSeconds: number): void {
  reply.setCookie(REFRESH_COOKIE, token, { ...ATTRIBUTES, maxAge: maxAgeSeconds });
}

/** The clearing cookie: empty value, `Max-Age=0`, same path and attributes (spec §5 rule 3). */
export function clearRefreshCookie(reply: FastifyReply): void {
  reply.setCookie(REFRESH_COOKIE, '', { ...ATTRIBUTES, maxAge: 0 });
}
