import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { AJV_OPTIONS, BODY_LIMIT_BYTES } from './http-options.js';
import type { Config } from './config.js';
import type { AuthMetrics } from './metrics.js';
import { registerBodyParsers } from './plugins/body-parsers.js';
import { registerErrorHandler, sendError } from './plugins/error-handler.js';
import { answerClientError, registerHttpHardening, registerResponseSecurityHeaders, setResponseSecurityHeaders, slowClientServerOptions } from './plugins/http-hardening.js';
import { UNMATCHED_ROUTE } from './plugins/metrics.js';
import { registerOpenApi } from './plugins/openapi.js';
import { registerRequestLog, requestLogServerOptions } from './plugins/request-log.js';
import { createAdminAuth, type AdminAuth } from './modules/admin/admin-auth.js';
import type { AdminKeyAuthenticator } from './modules/admin/admin-keys.service.js';
import { ADMIN_OPENAPI } from './modules/admin/admin-openapi.js';

/** Every route of the admin API lives under this prefix, on the admin listener only (docs/admin-api.md). */
export const ADMIN_PREFIX = '/admin/v0';

const MS_PER_SECOND = 1000;

/**
 * A group of admin routes: given the key check of the admin app, the plugin that registers them
 * (below {@link ADMIN_PREFIX}). `buildApp` passes the users, sessions and audit groups; a new
 * group (the webhooks, say) is one more entry of {@link AdminAppDeps.routes}.
 */
export type AdminRoutes = (auth: AdminAuth) => FastifyPluginAsyncTypebox;

/** What {@link buildAdminApp} needs; the services behind the routes are the public app's. */
export interface AdminAppDeps {
  readonly config: Pick<Config, 'trustProxy'>;
  readonly logger: FastifyBaseLogger;
  /** The public app's metrics: admin requests are counted under their own route patterns. */
  readonly metrics: Pick<AuthMetrics, 'observeHttp'>;
  readonly authenticator: AdminKeyAuthenticator;
  readonly routes: readonly AdminRoutes[];
}

/** Whether a request path is below the admin prefix (its query string aside). */
function underAdminPrefix(url: string): boolean {
  const path = url.split('?', 1)[0]!;
  return path === ADMIN_PREFIX || path.startsWith(`${ADMIN_PREFIX}/`);
}

/**
 * Builds the admin API (docs/admin-api.md) as a Fastify instance of its own, for a listener of its
 * own (ADMIN_HOST:ADMIN_PORT; `serve` listens, tests call `inject()`): the Ajv options, body
 * limit, body parsers, error body, security headers, request ids and request log of the public
 * app, and no CORS and no cookies (it is for servers, never for browsers). It serves only
 * {@link ADMIN_PREFIX}: `routes`, its OpenAPI document at `GET /admin/v0/openapi.json` and a
 * reference page at `GET /admin/v0/docs` (both without a key). Any other path answers 404
 * `admin.not_found`; below the prefix, after the key check (401 first, as for every admin route).
 */
export async function buildAdminApp(deps: AdminAppDeps): Promise<FastifyInstance> {
  const { authenticator } = deps;
  const app = Fastify({
    loggerInstance: deps.logger,
    ajv: AJV_OPTIONS,
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: deps.config.trustProxy,
    return503OnClosing: false,
    // A path that cannot be percent-decoded names no resource (as on the public listener).
    frameworkErrors: (error, request, reply) => {
      request.log.info({ errorCode: error.code }, 'rejected undecodable URL');
      setResponseSecurityHeaders(reply as FastifyReply);
      void sendError(reply as FastifyReply, 'admin.not_found');
    },
    clientErrorHandler: answerClientError,
    ...slowClientServerOptions(),
    ...requestLogServerOptions(),
  }).withTypeProvider<TypeBoxTypeProvider>();

  registerErrorHandler(app, {
    notFound: async (request, reply) => {
      if (underAdminPrefix(request.url)) await authenticator.authenticate(request.headers.authorization);
      return sendError(reply, 'admin.not_found');
    },
  });
  registerBodyParsers(app);
  registerResponseSecurityHeaders(app);
  registerRequestLog(app);
  await registerHttpHardening(app, { corsOrigins: [] });
  app.decorateRequest('adminKey', null);
  app.addHook('onResponse', (request, reply, done) => {
    deps.metrics.observeHttp({
      method: request.method,
      route: request.routeOptions.url ?? UNMATCHED_ROUTE,
      status: reply.statusCode,
      durationSeconds: reply.elapsedTime / MS_PER_SECOND,
    });
    done();
  });

  await registerOpenApi(app, { prefix: ADMIN_PREFIX, variant: ADMIN_OPENAPI });
  const auth = createAdminAuth(authenticator);
  await app.register(
    async (api) => {
      for (const routes of deps.routes) await api.register(routes(auth));
    },
    { prefix: ADMIN_PREFIX },
  );
  return app;
}
