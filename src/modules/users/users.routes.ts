import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { MeResponseSchema } from '../sessions/sessions.schemas.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import { clearRefreshCookie } from '../sessions/refresh-cookie.js';
import { ChangePasswordRequestSchema, SignUpRequestSchema, SignUpResponseSchema, toUser } from './users.schemas.js';
import type { UsersService } from './users.service.js';

/** POST /sign-up, POST /change-password, GET /me (spec §4). */
export function usersRoutes(deps: { users: UsersService; sessions: SessionsService }): FastifyPluginAsyncTypebox {
  const { users, sessions } = deps;
  return async (app) => {
    const bearer = bearerAuth(sessions);

    app.post(
      '/sign-up',
      {
        config: { validationError: 'auth.sign_up.validation_failed' },
        schema: {
          summary: 'Sign up with a username and an email or a phone number',
          body: SignUpRequestSchema,
          response: { 201: SignUpResponseSchema, ...errorResponses(400, 409) },
        },
      },
      async (request, reply) => {
        const user = await users.signUp(request.body);
        return reply.code(201).send({ user: toUser(user) });
      },
    );

    app.post(
      '/change-password',
      {
        onRequest: bearer,
        config: { validationError: 'auth.change_password.validation_failed' },
        schema: {
          summary: 'Change the password; revokes every session of the user',
          security: [{ bearerAuth: [] }],
          body: ChangePasswordRequestSchema,
          response: { 204: Type.Null(), ...errorResponses(400, 401) },
        },
      },
      async (request, reply) => {
        await users.changePassword(callerOf(request).user, {
          currentPassword: request.body.current_password,
          newPassword: request.body.new_password,
        });
        clearRefreshCookie(reply);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/me',
      {
        onRequest: bearer,
        schema: {
          summary: 'The calling user and session',
          security: [{ bearerAuth: [] }],
          response: { 200: MeResponseSchema, ...errorResponses(401) },
        },
      },
      async (request) => {
        const { user, session } = callerOf(request);
        return { user: toUser(user), session_id: session.id };
      },
    );
  };
}
