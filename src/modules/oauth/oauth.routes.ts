import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, errorResponses } from '../../errors.js';
import { bearerAuth, callerOf } from '../../plugins/authenticate.js';
import { TAGS } from '../../plugins/openapi.js';
import { clearOAuthFlowCookie, OAUTH_FLOW_COOKIE, setOAuthFlowCookie, setRefreshCookie } from '../sessions/refresh-cookie.js';
import { setMfaChallengeCookie } from '../sign-in/challenge-cookies.js';
import { clientContextOf } from '../../plugins/client-context.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import type { OAuthProviders } from './oauth-providers.js';
import {
  AuthorizeQuerySchema,
  CallbackParamsSchema,
  LinkRequestSchema,
  LinkResponseSchema,
  ProviderParamsSchema,
  ProvidersResponseSchema,
} from './oauth.schemas.js';
import type { OAuthService } from './oauth.service.js';

/** The query string of a request as the client sent it, without `?` (the callback checks it whole). */
function rawQuery(request: FastifyRequest): string {
  const q = request.url.indexOf('?');
  return q === -1 ? '' : request.url.slice(q + 1);
}

/** The one value of `name` in `query`; undefined when it is absent or repeated. */
function single(query: string, name: string): string | undefined {
  const values = new URLSearchParams(query).getAll(name);
  return values.length === 1 ? values[0] : undefined;
}

/** A form body (`form_post`) as query parameters, repeated members kept; members that are not text are dropped. */
function formQuery(body: unknown): string {
  const params = new URLSearchParams();
  if (body !== null && typeof body === 'object') {
    for (const [name, value] of Object.entries(body)) {
      for (const item of Array.isArray(value) ? value : [value]) if (typeof item === 'string') params.append(name, item);
    }
  }
  return params.toString();
}

/**
 * The identity-provider routes (docs/api.md#sign-in-with-an-identity-provider): the providers
 * list, authorize (302 to the provider, sets `oauth_flow`), the callback (GET, and POST for
 * `form_post`, which answers 303 to the GET) and link (Bearer).
 */
export function oauthRoutes(deps: { oauth: OAuthService; providers: OAuthProviders; sessions: SessionsService; publicUrl: string; apiPrefix: string }): FastifyPluginAsyncTypebox {
  const { oauth, providers, sessions, publicUrl, apiPrefix } = deps;
  const tags = [TAGS.identityProviders.name];
  const common = { config: { validationError: 'auth.oauth.validation_failed' as const } };
  const redirect = Type.Null({ description: 'No body; see the Location header.' });

  /** Answers the browser with a 303 and the callback's cookies: the flow cookie cleared; a session's refresh cookie or a second step's challenge. */
  const answerCallback = (reply: FastifyReply, outcome: Awaited<ReturnType<OAuthService['callback']>>): FastifyReply => {
    clearOAuthFlowCookie(reply);
    if (outcome.session !== undefined) setRefreshCookie(reply, outcome.session.refreshToken, outcome.session.refreshMaxAgeSeconds);
    if (outcome.mfaChallenge !== undefined) setMfaChallengeCookie(reply, outcome.mfaChallenge.value, outcome.mfaChallenge.maxAgeSeconds);
    return reply.header('cache-control', 'no-store').redirect(outcome.location, 303);
  };

  return async (app) => {
    app.get(
      '/oauth/providers',
      {
        ...common,
        schema: {
          summary: 'The configured identity providers, in configured order',
          operationId: 'listIdentityProviders',
          tags,
          response: { 200: ProvidersResponseSchema, ...errorResponses() },
        },
      },
      async () => ({ providers: providers.list.map((p) => ({ id: p.id, name: p.name })) }),
    );

    app.get(
      '/oauth/:provider/authorize',
      {
        ...common,
        schema: {
          summary: 'Start a sign-in at the provider: 302 to its authorization endpoint; sets the oauth_flow cookie',
          operationId: 'authorizeWithProvider',
          tags,
          params: ProviderParamsSchema,
          querystring: AuthorizeQuerySchema,
          response: { 302: redirect, ...errorResponses(400, 404, 429) },
        },
      },
      async (request, reply) => {
        const started = await oauth.authorize(request.params.provider, request.query.redirect_to, clientContextOf(request));
        setOAuthFlowCookie(reply, started.browserSecret, started.maxAgeSeconds);
        return reply.header('cache-control', 'no-store').redirect(started.authorizationUrl, 302);
      },
    );

    app.get(
      '/oauth/:provider/callback',
      {
        ...common,
        schema: {
          summary: "The provider's return: signs in or links, then 303 to the flow's redirect_to (with error=<code> on failure)",
          operationId: 'providerCallback',
          tags,
          security: [{ oauthFlowCookie: [] }],
          params: ProviderParamsSchema,
          querystring: CallbackParamsSchema,
          response: { 303: redirect, ...errorResponses(400, 404) },
        },
      },
      async (request, reply) => {
        const query = rawQuery(request);
        const outcome = await oauth.callback(
          request.params.provider,
          { query, state: single(query, 'state'), browserSecret: request.cookies[OAUTH_FLOW_COOKIE] },
          clientContextOf(request),
        );
        return answerCallback(reply, outcome);
      },
    );

    app.post(
      '/oauth/:provider/callback',
      {
        config: { formBody: true },
        schema: {
          summary: 'The provider\'s return by form_post: 303 to the GET callback with the same parameters, so the SameSite=Lax flow cookie comes along',
          operationId: 'providerCallbackFormPost',
          tags,
          params: ProviderParamsSchema,
          body: { content: { 'application/x-www-form-urlencoded': { schema: CallbackParamsSchema } } },
          response: { 303: redirect, ...errorResponses(404, 413) },
        },
      },
      async (request, reply) => {
        const p = providers.get(request.params.provider);
        if (p === undefined) throw new AppError('auth.oauth.unknown_provider');
        return reply.header('cache-control', 'no-store').redirect(`${publicUrl}${apiPrefix}/oauth/${p.id}/callback?${formQuery(request.body)}`, 303);
      },
    );

    app.post(
      '/oauth/:provider/link',
      {
        ...common,
        onRequest: bearerAuth(sessions),
        schema: {
          summary: 'Start linking a provider to the caller (recent sign-in required); sets the oauth_flow cookie',
          operationId: 'linkProvider',
          tags,
          security: [{ bearerAuth: [] }],
          params: ProviderParamsSchema,
          body: LinkRequestSchema,
          response: { 200: LinkResponseSchema, ...errorResponses(400, 401, 404, 413, 429) },
        },
      },
      async (request, reply) => {
        const started = await oauth.link(callerOf(request), request.params.provider, request.body.redirect_to, clientContextOf(request));
        setOAuthFlowCookie(reply, started.browserSecret, started.maxAgeSeconds);
        return { authorization_url: started.authorizationUrl };
      },
    );
  };
}
