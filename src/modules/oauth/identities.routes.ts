import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { clientContextOf } from '../../plugins/client-context.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import type { IdentitiesService } from './identities.service.js';
import { IdentitiesResponseSchema, IdentityIdParamsSchema, toIdentity } from './oauth.schemas.js';

/** GET /identities and DELETE /identities/{identity_id} (docs/api.md#list-identities, docs/api.md#unlink-an-identity). */
export function identitiesRoutes(deps: { identities: IdentitiesService; sessions: SessionsService }): FastifyPluginAsyncTypebox {
  const { identities, sessions } = deps;
  const bearer = bearerAuth(sessions);
  const tags = [TAGS.identityProviders.name];
  return async (app) => {
    app.get(
      '/identities',
      {
        onRequest: bearer,
        schema: {
          summary: "The caller's identities at providers, oldest first",
          operationId: 'listIdentities',
          tags,
          security: [{ bearerAuth: [] }],
          response: { 200: IdentitiesResponseSchema, ...errorResponses(401) },
        },
      },
      async (request) => ({ identities: (await identities.list(callerOf(request))).map(toIdentity) }),
    );

    app.delete(
      '/identities/:identity_id',
      {
        onRequest: bearer,
        schema: {
          summary: 'Unlink one of the caller\'s identities (recent sign-in required; never the last way to sign in)',
          operationId: 'unlinkIdentity',
          tags,
          security: [{ bearerAuth: [] }],
          params: IdentityIdParamsSchema,
          response: { 204: Type.Null(), ...errorResponses(401, 403, 404, 409) },
        },
      },
      async (request, reply) => {
        await identities.unlink(callerOf(request), request.params.identity_id, clientContextOf(request));
        return reply.code(204).send(null);
      },
    );
  };
}
