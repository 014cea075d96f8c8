import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { MeResponseSchema } from '../sessions/sessions.schemas.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import { clearRefreshCookie } from '../sessions/refresh-cookie.js';
import { ChangePasswordRequestSchema, SetPasswordRequestSchema, SignUpRequestSchema, SignUpResponseSchema, toUser } from './users.schemas.js';
import type { UsersService } from './users.service.js';
import { clientContextOf } from '../../plugins/client-context.js';

/** POST /sign-up, GET /me, POST /change-password, POST /password (docs/api.md#sign-up, docs/api.md#me, docs/api.md#change-password, docs/api.md#set-a-password). */
export function usersRoutes(deps: {
  users: UsersService;
  sessions: SessionsService;
}): FastifyPluginAsyncTypebox {
  const { users, sessions } = deps;
  return async (app) => {
    const bearer = bearerAuth(sessions);

    app.post(
      '/sign-up',
      {
        config: { validationError: 'auth.sign_up.validation_failed' },
        schema: {
          summary: 'Sign up with a username and an email or a phone number',
          operationId: 'signUp',
          tags: [TAGS.signUp.name],
          body: SignUpRequestSchema,
          response: { 201: SignUpResponseSchema, ...errorResponses(400, 409, 413, 429) },
        },
      },
      async (request, reply) => {
        const user = await users.signUp(request.body, clientContextOf(request));
        return reply.code(201).send({ user: toUser(user) });
      },
    );

    app.get(
      '/me',
      {
        onRequest: bearer,
        schema: {
          summary: 'The calling user and session',
          operationId: 'getMe',
          tags: [TAGS.account.name],
          security: [{ bearerAuth: [] }],
          response: { 200: MeResponseSchema, ...errorResponses(401) },
        },
      },
      async (request) => {
        const { user, session } = callerOf(request);
        return { user: toUser(user), session_id: session.id };
      },
    );

    app.post(
      '/change-password',
      {
        onRequest: bearer,
        config: { validationError: 'auth.change_password.validation_failed' },
        schema: {
          summary: 'Change the password; revokes every session of the user',
          operationId: 'changePassword',
          tags: [TAGS.account.name],
          security: [{ bearerAuth: [] }],
          body: ChangePasswordRequestSchema,
          response: { 204: Type.Null(), ...errorResponses(400, 401, 413, 429) },
        },
      },
      async (request, reply) => {
        await users.changePassword(callerOf(request), {
          currentPassword: request.body.current_password,
          newPassword: request.body.new_password,
        }, clientContextOf(request));
        clearRefreshCookie(reply);
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/password',
      {
        onRequest: bearer,
        config: { validationError: 'auth.password.validation_failed' },
        schema: {
          summary: 'Set the first password of a user who has none (recent sign-in required)',
          operationId: 'setPassword',
          tags: [TAGS.account.name],
          security: [{ bearerAuth: [] }],
          body: SetPasswordRequestSchema,
          response: { 204: Type.Null(), ...errorResponses(400, 401, 409, 413) },
        },
      },
      async (request, reply) => {
        await users.setPassword(callerOf(request), { newPassword: request.body.new_password }, clientContextOf(request));
        return reply.code(204).send(null);
      },
    );
  };
}
