import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Authenticated, SessionsService } from '../modules/sessions/sessions.service.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the Bearer hook on routes that require an access token. */
    auth: Authenticated | null;
  }
}

/**
 * Builds the `onRequest` hook for Bearer routes (docs/api.md#refresh-cookie): verifies the access token and its
 * session before the body is even read, and stores the caller on `request.auth`.
 * Failures answer 401 through the error handler. `buildApp` declares the `auth` decorator.
 */
export function bearerAuth(sessions: SessionsService): onRequestHookHandler {
  return async (request) => {
    request.auth = await sessions.authenticate(request.headers.authorization);
  };
}

/** The caller of a Bearer route. Throws if the route forgot the hook (a programming error, answered 500). */
export function callerOf(request: FastifyRequest): Authenticated {
  if (request.auth === null) throw new Error('route is missing the bearer hook');
  return request.auth;
}
