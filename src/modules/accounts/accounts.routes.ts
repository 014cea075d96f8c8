import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { clearRefreshCookie } from '../sessions/refresh-cookie.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import { DeleteAccountRequestSchema } from './accounts.schemas.js';
import type { AccountsService } from './accounts.service.js';
import { clientContextOf } from '../../plugins/client-context.js';

/** POST /delete-account (docs/api.md#delete-account). */
export function accountsRoutes(deps: { accounts: AccountsService; sessions: SessionsService }): FastifyPluginAsyncTypebox {
  const { accounts, sessions } = deps;
  return async (app) => {
    app.post(
      '/delete-account',
      {
        onRequest: bearerAuth(sessions),
        config: { validationError: 'auth.delete_account.validation_failed' },
        schema: {
          summary: 'Delete the account and everything that belongs to it; clears the refresh cookie',
          operationId: 'deleteAccount',
          tags: [TAGS.account.name],
          security: [{ bearerAuth: [] }],
          body: DeleteAccountRequestSchema,
          response: { 204: Type.Null(), ...errorResponses(400, 401, 413, 429) },
        },
      },
      async (request, reply) => {
        await accounts.deleteAccount(callerOf(request), { password: request.body.password }, clientContextOf(request));
        clearRefreshCookie(reply);
        return reply.code(204).send(null);
      },
    );
  };
}
