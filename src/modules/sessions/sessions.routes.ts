import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ERROR_CATALOG, errorResponses } from '../../errors.js';
import { securityEvent } from '../audit/security-events.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { toUser } from '../users/users.schemas.js';
import { clearRefreshCookie, REFRESH_COOKIE, setMfaChallengeCookie, setRefreshCookie } from './refresh-cookie.js';
import {
  RefreshResponseSchema,
  SessionIdParamsSchema,
  SessionsResponseSchema,
  SignInRequestSchema,
  SignInResponseSchema,
  toSession,
} from './sessions.schemas.js';
import { clientContextOf } from '../../plugins/client-context.js';
import type { SessionsService } from './sessions.service.js';

/** POST /sign-in, /refresh, /logout; GET and DELETE /sessions; DELETE /sessions/{session_id} (docs/api.md#operations). */
export function sessionsRoutes(deps: { sessions: SessionsService }): FastifyPluginAsyncTypebox {
  const { sessions } = deps;
  return async (app) => {
    const bearer = bearerAuth(sessions);

    app.post(
      '/sign-in',
      {
        config: { validationError: 'auth.sign_in.validation_failed' },
        schema: {
          summary: 'Sign in; sets the refresh cookie',
          operationId: 'signIn',
          tags: [TAGS.signIn.name],
          body: SignInRequestSchema,
          response: { 200: SignInResponseSchema, ...errorResponses(400, 401, 403, 413, 429) },
        },
      },
      async (request, reply) => {
        const issued = await sessions.signIn(request.body, clientContextOf(request));
        if (issued.kind === 'mfa_required') {
          // No session yet: the second step (docs/api.md#sign-in-second-step) completes it.
          setMfaChallengeCookie(reply, issued.challenge, issued.challengeMaxAgeSeconds);
          return reply.code(403).send({ code: 'auth.mfa_required', message: ERROR_CATALOG['auth.mfa_required'].message });
        }
        setRefreshCookie(reply, issued.refreshToken, issued.refreshMaxAgeSeconds);
        return { user: toUser(issued.user), session_id: issued.sessionId, tokens: { access_token: issued.accessToken } };
      },
    );

    app.post(
      '/refresh',
      {
        schema: {
          summary: 'Rotate the refresh token; sets a new refresh cookie',
          operationId: 'refresh',
          tags: [TAGS.signIn.name],
          security: [{ refreshCookie: [] }],
          response: { 200: RefreshResponseSchema, ...errorResponses(401) },
        },
      },
      async (request, reply) => {
        const issued = await sessions.refresh(request.cookies[REFRESH_COOKIE], clientContextOf(request));
        setRefreshCookie(reply, issued.refreshToken, issued.refreshMaxAgeSeconds);
        return { tokens: { access_token: issued.accessToken }, session_id: issued.sessionId };
      },
    );

    app.post(
      '/logout',
      {
        onRequest: bearer,
        schema: {
          summary: 'Revoke the current session; clears the refresh cookie',
          operationId: 'logout',
          tags: [TAGS.signIn.name],
          security: [{ bearerAuth: [] }],
          response: { 204: Type.Null(), ...errorResponses(401) },
        },
      },
      async (request, reply) => {
        const caller = callerOf(request);
        await sessions.logout(caller);
        securityEvent(request.log, 'session.revoked', { userId: caller.user.id, sessionId: caller.session.id, ip: request.ip, reason: 'logout' });
        clearRefreshCookie(reply);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/sessions',
      {
        onRequest: bearer,
        schema: {
          summary: 'Active sessions of the caller',
          operationId: 'listSessions',
          tags: [TAGS.sessions.name],
          security: [{ bearerAuth: [] }],
          response: { 200: SessionsResponseSchema, ...errorResponses(401) },
        },
      },
      async (request) => {
        const caller = callerOf(request);
        const rows = await sessions.list(caller);
        return { sessions: rows.map((row) => toSession(row, caller.session.id)) };
      },
    );

    app.delete(
      '/sessions',
      {
        onRequest: bearer,
        schema: {
          summary: 'Revoke every session of the caller; clears the refresh cookie',
          operationId: 'revokeAllSessions',
          tags: [TAGS.sessions.name],
          security: [{ bearerAuth: [] }],
          response: { 204: Type.Null(), ...errorResponses(401) },
        },
      },
      async (request, reply) => {
        const caller = callerOf(request);
        const count = await sessions.revokeAll(caller);
        securityEvent(request.log, 'session.revoked', { userId: caller.user.id, sessionId: caller.session.id, ip: request.ip, reason: 'revoke_all', count });
        clearRefreshCookie(reply);
        return reply.code(204).send(null);
      },
    );

    app.delete(
      '/sessions/:session_id',
      {
        onRequest: bearer,
        schema: {
          summary: 'Revoke one session of the caller',
          operationId: 'revokeSession',
          tags: [TAGS.sessions.name],
          security: [{ bearerAuth: [] }],
          params: SessionIdParamsSchema,
          response: { 204: Type.Null(), ...errorResponses(401, 403, 404) },
        },
      },
      async (request, reply) => {
        const caller = callerOf(request);
        await sessions.revokeOne(caller, request.params.session_id);
        securityEvent(request.log, 'session.revoked', { userId: caller.user.id, sessionId: request.params.session_id, ip: request.ip, reason: 'revoked_by_user' });
        return reply.code(204).send(null);
      },
    );
  };
}
