import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { clientContextOf } from '../../plugins/client-context.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import {
  CreationOptionsSchema,
  PasskeyListResponseSchema,
  PasskeyParamsSchema,
  PasskeyRegistrationRequestSchema,
  PasskeyRenameRequestSchema,
  PasskeyResponseSchema,
  toPasskey,
} from './passkeys.schemas.js';
import type { PasskeysService } from './passkeys.service.js';

/**
 * The passkey routes (docs/api.md#passkeys): registration options and registration, listing,
 * renaming and deletion (Bearer). Sign-in with a passkey is in sign-in.routes.ts.
 */
export function passkeysRoutes(deps: { passkeys: PasskeysService; sessions: SessionsService }): FastifyPluginAsyncTypebox {
  const { passkeys, sessions } = deps;
  const bearer = bearerAuth(sessions);
  const common = { config: { validationError: 'auth.passkeys.validation_failed' as const } };
  const tags = [TAGS.passkeys.name];
  return async (app) => {
    app.post(
      '/passkeys/registration/options',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: 'Options for navigator.credentials.create(): a new challenge (300 s, single use) for the caller',
          operationId: 'passkeyRegistrationOptions',
          tags,
          security: [{ bearerAuth: [] }],
          response: { 200: CreationOptionsSchema, ...errorResponses(401, 409, 429) },
        },
      },
      async (request) => passkeys.registrationOptions(callerOf(request).user),
    );

    app.post(
      '/passkeys/registration',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: 'Register a passkey with the response of navigator.credentials.create()',
          operationId: 'registerPasskey',
          tags,
          security: [{ bearerAuth: [] }],
          body: PasskeyRegistrationRequestSchema,
          response: { 201: PasskeyResponseSchema, ...errorResponses(400, 401, 409, 413) },
        },
      },
      async (request, reply) => {
        const row = await passkeys.register(callerOf(request).user, request.body, clientContextOf(request));
        return reply.code(201).send({ passkey: toPasskey(row) });
      },
    );

    app.get(
      '/passkeys',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: "The caller's passkeys, oldest first",
          operationId: 'listPasskeys',
          tags,
          security: [{ bearerAuth: [] }],
          response: { 200: PasskeyListResponseSchema, ...errorResponses(401) },
        },
      },
      async (request) => ({ passkeys: (await passkeys.list(callerOf(request).user)).map(toPasskey) }),
    );

    app.patch(
      '/passkeys/:passkey_id',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: 'Rename one of the caller\'s passkeys',
          operationId: 'renamePasskey',
          tags,
          security: [{ bearerAuth: [] }],
          params: PasskeyParamsSchema,
          body: PasskeyRenameRequestSchema,
          response: { 200: PasskeyResponseSchema, ...errorResponses(400, 401, 403, 404, 413) },
        },
      },
      async (request) => ({ passkey: toPasskey(await passkeys.rename(callerOf(request).user, request.params.passkey_id, request.body.name)) }),
    );

    app.delete(
      '/passkeys/:passkey_id',
      {
        ...common,
        onRequest: bearer,
        schema: {
          summary: 'Delete one of the caller\'s passkeys; it no longer signs in',
          operationId: 'deletePasskey',
          tags,
          security: [{ bearerAuth: [] }],
          params: PasskeyParamsSchema,
          response: { 204: Type.Null(), ...errorResponses(401, 403, 404) },
        },
      },
      async (request, reply) => {
        await passkeys.remove(callerOf(request).user, request.params.passkey_id, clientContextOf(request));
        return reply.code(204).send(null);
      },
    );
  };
}
