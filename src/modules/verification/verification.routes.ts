import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { TAGS } from '../../plugins/openapi.js';
import { normalizeEmail } from '../users/identifiers.js';
import { ResendVerificationBodySchema, VerifyEmailBodySchema, VerifyEmailQuerySchema } from './verification.schemas.js';
import type { VerificationService } from './verification.service.js';

/** GET and POST /verify-email, POST /verify-email/resend (docs/api.md#verify-email-get, docs/api.md#verify-email-post: both forms, same semantics). */
export function verificationRoutes(deps: { verification: VerificationService }): FastifyPluginAsyncTypebox {
  const { verification } = deps;
  return async (app) => {
    const verifyResponses = { 204: Type.Null(), ...errorResponses(400, 404, 410, 429) };
    // The JSON form also answers 413 for a body over the limit.
    const verifyBodyResponses = { 204: Type.Null(), ...errorResponses(400, 404, 410, 413, 429) };

    app.get(
      '/verify-email',
      {
        config: { validationError: 'auth.verify_email.validation_failed' },
        schema: {
          summary: 'Verify an email address with its code',
          operationId: 'verifyEmail',
          tags: [TAGS.signUp.name],
          querystring: VerifyEmailQuerySchema,
          response: verifyResponses,
        },
      },
      async (request, reply) => {
        await verification.verify(normalizeEmail(request.query.email), request.query.code, { ip: request.ip });
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/verify-email',
      {
        config: { validationError: 'auth.verify_email.validation_failed' },
        schema: {
          summary: 'Verify an email address with its code (JSON body)',
          operationId: 'verifyEmailWithBody',
          tags: [TAGS.signUp.name],
          body: VerifyEmailBodySchema,
          response: verifyBodyResponses,
        },
      },
      async (request, reply) => {
        await verification.verify(normalizeEmail(request.body.email), request.body.code, { ip: request.ip });
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/verify-email/resend',
      {
        config: { validationError: 'auth.resend_verification.validation_failed' },
        schema: {
          summary: 'Queue a fresh code for an unverified address (204 whatever the address)',
          operationId: 'resendVerification',
          tags: [TAGS.signUp.name],
          body: ResendVerificationBodySchema,
          response: { 204: Type.Null(), ...errorResponses(400, 413, 429) },
        },
      },
      async (request, reply) => {
        await verification.resend(normalizeEmail(request.body.email), { ip: request.ip });
        return reply.code(204).send(null);
      },
    );
  };
}
