import type { FastifyReply } from 'fastify';

/**
 * Setting and clearing one of the service's cookies (docs/api.md#refresh-cookie and the
 * challenge cookies): `HttpOnly; Secure; SameSite=Strict` (or `Lax`) on its own path; cleared
 * with an empty value, `Max-Age=0`, the same path and attributes.
 * @param name the cookie's name; `path` the only path the browser sends it to.
 * @returns `set(reply, value, maxAgeSeconds)` and `clear(reply)`.
 */
export function serviceCookie(name: string, path: string, sameSite: 'strict' | 'lax' = 'strict') {
  const attributes = { path, httpOnly: true, secure: true, sameSite } as const;
  return {
    set: (reply: FastifyReply, value: string, maxAgeSeconds: number): void => void reply.setCookie(name, value, { ...attributes, maxAge: maxAgeSeconds }),
    clear: (reply: FastifyReply): void => void reply.setCookie(name, '', { ...attributes, maxAge: 0 }),
  };
}
