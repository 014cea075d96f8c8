import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

/**
 * One request to the admin app `admin` (docs/admin-api.md): with the admin API key `key` as a
 * Bearer token (null: no authorization header), and a JSON body when `body` is given.
 */
export function adminRequest(
  admin: FastifyInstance,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  options: { key: string | null; body?: unknown; headers?: Record<string, string> },
): Promise<LightMyRequestResponse> {
  return admin.inject({
    method,
    url,
    headers: {
      ...(options.key === null ? {} : { authorization: `Bearer ${options.key}` }),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    ...(options.body === undefined ? {} : { payload: JSON.stringify(options.body) }),
  });
}
