import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError } from '../../errors.js';
import type { AuditActor } from './admin-audit.repo.js';
import type { AdminKeyAuthenticator, AdminKeyIdentity, AdminScope } from './admin-keys.service.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the admin API's key hook ({@link AdminAuth.requireScope}) on the routes that need a key. */
    adminKey: AdminKeyIdentity | null;
  }
}

/** What an admin route plugin gets to guard its routes (docs/admin-api.md#api-keys). */
export interface AdminAuth {
  /**
   * The `onRequest` hook of a route that needs `scope`: the key is checked before the body is
   * read (401 `admin.invalid_api_key`, 429 `admin.too_many_requests`), then the scope (403
   * `admin.insufficient_scope`), so both come before any 400 or 404 of the route.
   */
  requireScope(scope: AdminScope): onRequestHookHandler;
}

/** The {@link AdminAuth} of an admin app over `authenticator`; `buildAdminApp` declares the `adminKey` decorator. */
export function createAdminAuth(authenticator: AdminKeyAuthenticator): AdminAuth {
  return {
    requireScope(scope) {
      return async (request) => {
        const key = await authenticator.authenticate(request.headers.authorization);
        if (!key.scopes.includes(scope)) throw new AppError('admin.insufficient_scope', { message: `This operation needs an admin API key with the scope ${scope}.` });
        request.adminKey = key;
      };
    },
  };
}

/**
 * Who makes an admin request, as the audit log records it: the key, the client address (with
 * TRUST_PROXY applied: `request.ip`) and the request id the answer carries in `X-Request-Id`.
 * Throws if the route forgot its key hook (a programming error, answered 500).
 */
export function actorOf(request: FastifyRequest): AuditActor {
  const key = request.adminKey;
  if (key === null) throw new Error('admin route is missing its key hook');
  return { keyId: key.keyId, keyName: key.keyName, ip: request.ip ?? null, requestId: request.id };
}
