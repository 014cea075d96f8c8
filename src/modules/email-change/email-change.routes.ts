import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { clientContextOf } from '../../plugins/client-context.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import { normalizeEmail } from '../users/identifiers.js';
import { toUser } from '../users/users.schemas.js';
import { ChangeEmailRequestSchema, ConfirmEmailChangeRequestSchema, ConfirmEmailChangeResponseSchema } from './email-change.schemas.js';
import type { EmailChangeService } from './email-change.service.js';

/** POST /change-email and POST /change-email/confirm (docs/api.md#change-email, docs/api.md#confirm-an-email-change). */
export function emailChangeRoutes(deps: { emailChange: EmailChangeService; sessions: SessionsService }): FastifyPluginAsyncTypebox {
  const { emailChange, sessions } = deps;
  return async (app) => {
    app.post(
      '/change-email',
      {
        onRequest: bearerAuth(sessions),
        config: { validationError: 'auth.change_email.validation_failed' },
        schema: {
          summary: 'Send a code to a new email address (nothing changes until it is confirmed)',
          operationId: 'changeEmail',
          tags: [TAGS.account.name],
          security: [{ bearerAuth: [] }],
          body: ChangeEmailRequestSchema,
          response: { 204: Type.Null(), ...errorResponses(400, 401, 409, 413, 429) },
        },
      },
      async (request, reply) => {
        const { new_email: newEmail, password } = request.body;
        await emailChange.request(callerOf(request), { newEmail: normalizeEmail(newEmail), password }, clientContextOf(request));
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/change-email/confirm',
      {
        onRequest: bearerAuth(sessions),
        config: { validationError: 'auth.change_email.validation_failed' },
        schema: {
          summary: 'Confirm the new email address with the code sent to it',
          operationId: 'confirmEmailChange',
          tags: [TAGS.account.name],
          security: [{ bearerAuth: [] }],
          body: ConfirmEmailChangeRequestSchema,
          response: { 200: ConfirmEmailChangeResponseSchema, ...errorResponses(400, 401, 409, 410, 413, 429) },
        },
      },
      async (request) => {
        const user = await emailChange.confirm(callerOf(request).user, { code: request.body.code }, clientContextOf(request));
        return { user: toUser(user) };
      },
    );
  };
}
