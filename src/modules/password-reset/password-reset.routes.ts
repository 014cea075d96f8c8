import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { TAGS } from '../../plugins/openapi.js';
import { normalizeEmail } from '../users/identifiers.js';
import { PasswordResetConfirmSchema, PasswordResetRequestSchema } from './password-reset.schemas.js';
import type { PasswordResetService } from './password-reset.service.js';
import { clientContextOf } from '../../plugins/client-context.js';

/** POST /password-reset and POST /password-reset/confirm (docs/api.md#request-a-password-reset, docs/api.md#confirm-a-password-reset). */
export function passwordResetRoutes(deps: { passwordReset: PasswordResetService }): FastifyPluginAsyncTypebox {
  const { passwordReset } = deps;
  return async (app) => {
    app.post(
      '/password-reset',
      {
        config: { validationError: 'auth.password_reset.validation_failed' },
        schema: {
          summary: 'Email a password-reset code (204 whatever the address)',
          operationId: 'requestPasswordReset',
          tags: [TAGS.recovery.name],
          body: PasswordResetRequestSchema,
          response: { 204: Type.Null(), ...errorResponses(400, 413, 429) },
        },
      },
      async (request, reply) => {
        // One durable row per well-formed address; the lookup and the code are the outbox worker's
        // (docs/api.md#request-a-password-reset).
        await passwordReset.request(normalizeEmail(request.body.email), clientContextOf(request));
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/password-reset/confirm',
      {
        config: { validationError: 'auth.password_reset.validation_failed' },
        schema: {
          summary: 'Set a new password with the emailed code; ends every session',
          operationId: 'confirmPasswordReset',
          tags: [TAGS.recovery.name],
          body: PasswordResetConfirmSchema,
          response: { 204: Type.Null(), ...errorResponses(400, 410, 413, 429) },
        },
      },
      async (request, reply) => {
        const { email, code, new_password: newPassword } = request.body;
        await passwordReset.confirm({ email: normalizeEmail(email), code, newPassword }, clientContextOf(request));
        return reply.code(204).send(null);
      },
    );
  };
}
