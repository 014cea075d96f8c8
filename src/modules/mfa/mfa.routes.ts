import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { clientContextOf } from '../../plugins/client-context.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import {
  MfaEnableRequestSchema,
  MfaPasswordAndCodeRequestSchema,
  MfaSetupRequestSchema,
  MfaSetupResponseSchema,
  RecoveryCodesResponseSchema,
} from './mfa.schemas.js';
import type { MfaService } from './mfa.service.js';

/**
 * The second factor's routes (docs/api.md#second-factor): TOTP setup, enable, disable and
 * recovery-code regeneration (Bearer). The second step of a sign-in is in sign-in.routes.ts.
 */
export function mfaRoutes(deps: { mfa: MfaService; sessions: SessionsService }): FastifyPluginAsyncTypebox {
  const { mfa, sessions } = deps;
  const bearer = bearerAuth(sessions);
  const common = { config: { validationError: 'auth.mfa.validation_failed' as const } };
  return async (app) => {
    app.post(
      '/mfa/totp/setup',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: 'Start TOTP: a new secret and its otpauth URI (nothing is turned on yet)',
          operationId: 'setUpTotp',
          tags: [TAGS.secondFactor.name],
          security: [{ bearerAuth: [] }],
          body: MfaSetupRequestSchema,
          response: { 200: MfaSetupResponseSchema, ...errorResponses(400, 401, 409, 413, 429) },
        },
      },
      async (request) => {
        const { secret, otpauthUri } = await mfa.setup(callerOf(request), request.body, clientContextOf(request));
        return { secret, otpauth_uri: otpauthUri };
      },
    );

    app.post(
      '/mfa/totp/enable',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: 'Turn TOTP on with a code; answers the recovery codes, once',
          operationId: 'enableTotp',
          tags: [TAGS.secondFactor.name],
          security: [{ bearerAuth: [] }],
          body: MfaEnableRequestSchema,
          response: { 200: RecoveryCodesResponseSchema, ...errorResponses(400, 401, 409, 413, 429) },
        },
      },
      async (request) => ({ recovery_codes: await mfa.enable(callerOf(request).user, request.body, clientContextOf(request)) }),
    );

    app.post(
      '/mfa/totp/disable',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: 'Turn TOTP off with the password and a code',
          operationId: 'disableTotp',
          tags: [TAGS.secondFactor.name],
          security: [{ bearerAuth: [] }],
          body: MfaPasswordAndCodeRequestSchema,
          response: { 204: Type.Null(), ...errorResponses(400, 401, 413, 429) },
        },
      },
      async (request, reply) => {
        await mfa.disable(callerOf(request), request.body, clientContextOf(request));
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/mfa/recovery-codes',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: 'Replace the recovery codes (the old ones die); answers the new ones, once',
          operationId: 'regenerateRecoveryCodes',
          tags: [TAGS.secondFactor.name],
          security: [{ bearerAuth: [] }],
          body: MfaPasswordAndCodeRequestSchema,
          response: { 200: RecoveryCodesResponseSchema, ...errorResponses(400, 401, 413, 429) },
        },
      },
      async (request) => ({ recovery_codes: await mfa.regenerateRecoveryCodes(callerOf(request), request.body, clientContextOf(request)) }),
    );
  };
}
