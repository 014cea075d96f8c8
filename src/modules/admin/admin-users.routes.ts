import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type TSchema } from '@sinclair/typebox';
import type { preValidationHookHandler } from 'fastify';
import { errorResponses } from '../../errors.js';
import { actorOf, type AdminAuth } from './admin-auth.js';
import type { AuditActor } from './admin-audit.repo.js';
import type { AdminScope } from './admin-keys.service.js';
import { ADMIN_SECURITY, ADMIN_TAGS } from './admin-openapi.js';
import type { AdminUsersService } from './admin-users.service.js';
import {
  AdminSessionsResponseSchema,
  AdminUserSchema,
  BanRequestSchema,
  CreateUserRequestSchema,
  EmptyBodySchema,
  ListUsersQuerySchema,
  ListUsersResponseSchema,
  pageSize,
  UpdateUserRequestSchema,
  UserIdParamsSchema,
  UserSessionParamsSchema,
} from './admin.schemas.js';
import '../../plugins/route-config.js';

/** Statuses every admin route may answer besides its own: a bad key, a missing scope, the key's rate limit. */
export const KEYED = [401, 403, 429] as const;

/**
 * An operation that takes no body (docs/admin-api.md#conventions) accepts none or `{}`: an
 * absent body is read as `{}`, so that the schema refuses only members.
 */
export const emptyBodyDefault: preValidationHookHandler = (request, _reply, done) => {
  // Only an absent body: a JSON `null` is a body, which the schema refuses.
  if (request.body === undefined) request.body = {};
  done();
};

/** The ids of a path, lower-cased: UUIDs in any case name the same row. */
function lower<T extends Record<string, string>>(params: T): T {
  return Object.fromEntries(Object.entries(params).map(([k, v]) => [k, v.toLowerCase()])) as T;
}

/**
 * The admin API's users and sessions routes (docs/admin-api.md): listing and search, read,
 * create, update, delete, ban, unban, password reset, second-factor reset, and a user's sessions.
 */
export function adminUsersRoutes(deps: { users: AdminUsersService }): (auth: AdminAuth) => FastifyPluginAsyncTypebox {
  const { users } = deps;
  return (auth) => async (app) => {
    const config = { validationError: 'admin.validation_failed' as const };
    const read = { config, onRequest: auth.requireScope('users:read') };
    const write = { config, onRequest: auth.requireScope('users:write') };
    const noBody = { preValidation: emptyBodyDefault };
    const users_ = [ADMIN_TAGS.users.name];
    const sessions_ = [ADMIN_TAGS.sessions.name];

    app.get(
      '/users',
      {
        ...read,
        schema: {
          summary: 'List users newest first, or find them by id, username, email or phone prefix',
          operationId: 'listUsers',
          tags: users_,
          security: ADMIN_SECURITY,
          querystring: ListUsersQuerySchema,
          response: { 200: ListUsersResponseSchema, ...errorResponses(400, ...KEYED) },
        },
      },
      async (request) => {
        const page = await users.list({ query: request.query.query, limit: pageSize(request.query.limit), cursor: request.query.cursor });
        return { users: page.users, next_cursor: page.nextCursor };
      },
    );

    app.post(
      '/users',
      {
        ...write,
        schema: {
          summary: 'Create a user with the sign-up rules; no email is sent',
          operationId: 'createUser',
          tags: users_,
          security: ADMIN_SECURITY,
          body: CreateUserRequestSchema,
          response: { 201: AdminUserSchema, ...errorResponses(400, ...KEYED, 409, 413) },
        },
      },
      async (request, reply) => reply.code(201).send(await users.create(actorOf(request), request.body)),
    );

    app.get(
      '/users/:user_id',
      {
        ...read,
        schema: {
          summary: 'One user',
          operationId: 'getUser',
          tags: users_,
          security: ADMIN_SECURITY,
          params: UserIdParamsSchema,
          response: { 200: AdminUserSchema, ...errorResponses(400, ...KEYED, 404) },
        },
      },
      async (request) => users.get(lower(request.params).user_id),
    );

    app.patch(
      '/users/:user_id',
      {
        ...write,
        schema: {
          summary: 'Change a user\'s username, email, phone or their verification',
          operationId: 'updateUser',
          tags: users_,
          security: ADMIN_SECURITY,
          params: UserIdParamsSchema,
          body: UpdateUserRequestSchema,
          response: { 200: AdminUserSchema, ...errorResponses(400, ...KEYED, 404, 409, 413) },
        },
      },
      async (request) => users.update(actorOf(request), lower(request.params).user_id, request.body),
    );

    /**
     * An operation that takes no body and answers 204: the key and its scope, the path
     * parameters as `params`, an absent body read as `{}`, and `run` with the actor and the
     * lower-cased path ids.
     */
    const command = (
      method: 'POST' | 'DELETE',
      url: string,
      o: { scope: AdminScope; summary: string; operationId: string; tags: string[]; params: TSchema; errors: number[]; run: (actor: AuditActor, ids: Record<string, string>) => Promise<void> },
    ): void => {
      app.route({
        method,
        url,
        config,
        onRequest: auth.requireScope(o.scope),
        ...noBody,
        schema: {
          summary: o.summary,
          operationId: o.operationId,
          tags: o.tags,
          security: ADMIN_SECURITY,
          params: o.params,
          body: EmptyBodySchema,
          response: { 204: Type.Null(), ...errorResponses(400, ...KEYED, 404, 413, ...o.errors) },
        },
        handler: async (request, reply) => {
          await o.run(actorOf(request), lower(request.params as Record<string, string>));
          return reply.code(204).send(null);
        },
      });
    };

    command('DELETE', '/users/:user_id', {
      scope: 'users:write',
      summary: 'Delete a user and everything that belongs to it, as its owner\'s deletion does',
      operationId: 'deleteUser',
      tags: users_,
      params: UserIdParamsSchema,
      errors: [],
      run: (actor, ids) => users.remove(actor, ids.user_id!),
    });

    app.post(
      '/users/:user_id/ban',
      {
        ...write,
        ...noBody,
        schema: {
          summary: 'Ban a user until a date, or indefinitely; every session of the user ends',
          operationId: 'banUser',
          tags: users_,
          security: ADMIN_SECURITY,
          params: UserIdParamsSchema,
          body: BanRequestSchema,
          response: { 200: AdminUserSchema, ...errorResponses(400, ...KEYED, 404, 413) },
        },
      },
      async (request) => users.ban(actorOf(request), lower(request.params).user_id, request.body),
    );

    app.post(
      '/users/:user_id/unban',
      {
        ...write,
        ...noBody,
        schema: {
          summary: 'Lift the ban in force; the sessions it ended stay ended',
          operationId: 'unbanUser',
          tags: users_,
          security: ADMIN_SECURITY,
          params: UserIdParamsSchema,
          body: EmptyBodySchema,
          response: { 200: AdminUserSchema, ...errorResponses(400, ...KEYED, 404, 413) },
        },
      },
      async (request) => users.unban(actorOf(request), lower(request.params).user_id),
    );

    app.get(
      '/users/:user_id/sessions',
      {
        ...read,
        schema: {
          summary: 'The user\'s active sessions',
          operationId: 'listUserSessions',
          tags: sessions_,
          security: ADMIN_SECURITY,
          params: UserIdParamsSchema,
          response: { 200: AdminSessionsResponseSchema, ...errorResponses(400, ...KEYED, 404) },
        },
      },
      async (request) => ({ sessions: await users.listSessions(lower(request.params).user_id) }),
    );

    command('POST', '/users/:user_id/password-reset', {
      scope: 'users:write',
      summary: 'Email the user a password-reset code',
      operationId: 'sendPasswordReset',
      tags: users_,
      params: UserIdParamsSchema,
      errors: [409],
      run: (actor, ids) => users.sendPasswordReset(actor, ids.user_id!),
    });

    command('POST', '/users/:user_id/mfa/reset', {
      scope: 'users:write',
      summary: 'Remove the user\'s authenticator app and recovery codes (a lost second factor)',
      operationId: 'resetMfa',
      tags: users_,
      params: UserIdParamsSchema,
      errors: [],
      run: (actor, ids) => users.resetMfa(actor, ids.user_id!),
    });

    command('DELETE', '/users/:user_id/sessions', {
      scope: 'sessions:write',
      summary: 'End every active session of the user',
      operationId: 'revokeUserSessions',
      tags: sessions_,
      params: UserIdParamsSchema,
      errors: [],
      run: (actor, ids) => users.revokeSessions(actor, ids.user_id!),
    });

    command('DELETE', '/users/:user_id/sessions/:session_id', {
      scope: 'sessions:write',
      summary: 'End one session of the user',
      operationId: 'revokeUserSession',
      tags: sessions_,
      params: UserSessionParamsSchema,
      errors: [],
      run: (actor, ids) => users.revokeSession(actor, ids.user_id!, ids.session_id!),
    });
  };
}
