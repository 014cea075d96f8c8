import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { clearRefreshCookie, REFRESH_COOKIE, setRefreshCookie } from './refresh-cookie.js';
import {
  RefreshResponseSchema,
  SessionIdParamsSchema,
  SessionsResponseSchema,
  toSession,
} from './sessions.schemas.js';
import { clientContextOf } from '../../plugins/client-context.js';
import type { SessionsService } from './sessions.service.js';

/** POST /refresh, /logout; GET and DELETE /sessions; DELETE /sessions/{session_id} (docs/api.md#operations). Sign-in is in sign-in.routes.ts. */
export function sessionsRoutes(deps: { sessions: SessionsService }): FastifyPluginAsyncTypebox {
  const { sessions } = deps;
  return async (app) => {
    const bearer = bearerAuth(sessions);

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
        await sessions.logout(caller, clientContextOf(request));
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
        await sessions.revokeAll(caller, clientContextOf(request));
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
        await sessions.revokeOne(caller, request.params.session_id, clientContextOf(request));
        return reply.code(204).send(null);
      },
    );
  };
}
