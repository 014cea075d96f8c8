import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Clock } from '../clock.js';
import type { Db } from '../db/db.js';
import type { AuthMetrics } from '../metrics.js';
import { countOutboxBacklog, oldestPendingEmailCreatedAt } from '../modules/mail/mail.shared.js';
import { countDeliveryBacklog, oldestPendingDeliveryCreatedAt } from '../modules/webhooks/webhooks.shared.js';
import type { BacklogReader } from '../metrics.js';
import { errorResponses } from '../errors.js';
import { sendError } from './error-handler.js';
import { READINESS_TIMEOUT_MS, withTimeout } from './health.js';
import { requestLogServerOptions } from './request-log.js';
import { slowClientServerOptions } from './http-hardening.js';
import { TAGS } from './openapi.js';

/** Where Prometheus scrapes, outside the API prefix (docs/api.md#metrics). */
export const METRICS_PATH = '/metrics';

/** Label of requests that matched no route (404), so a scan of random URLs cannot create series. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Longest a scrape waits for a backlog query (outbox, webhook deliveries); the same bound as a readiness check. */
const OUTBOX_QUERY_TIMEOUT_MS = READINESS_TIMEOUT_MS;

const MS_PER_SECOND = 1000;

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's Prometheus metrics; services get the same object as a dependency. */
    metrics: AuthMetrics;
  }
}

/** Separate metrics servers started for an app by {@link listenMetrics}, closed with it. */
const metricsServers = new WeakMap<FastifyInstance, FastifyInstance[]>();

/** Writes the registry in the Prometheus text format. */
async function sendMetrics(metrics: AuthMetrics, reply: FastifyReply): Promise<FastifyReply> {
  const body = await metrics.registry.metrics();
  return reply.type(metrics.registry.contentType).send(body);
}

/**
 * Wires {@link AuthMetrics} into the app: decorates `app.metrics`, records every answered
 * request by method, route pattern (never the raw URL) and status, makes each scrape read the
 * outbox and webhook backlogs (bounded by a timeout; a failure is logged once per outage, never thrown), and,
 * unless `serveRoute` is false (METRICS_PORT set), serves `GET /metrics` on the app itself.
 * Register it before the routes.
 */
export function registerMetrics(app: FastifyInstance, deps: { readonly metrics: AuthMetrics; readonly db: Db; readonly clock: Clock; readonly serveRoute: boolean }): void {
  const { metrics, db, clock } = deps;
  app.decorate('metrics', metrics);

  app.addHook('onResponse', (request, reply, done) => {
    metrics.observeHttp({
      method: request.method,
      route: request.routeOptions.url ?? UNMATCHED_ROUTE,
      status: reply.statusCode,
      durationSeconds: reply.elapsedTime / MS_PER_SECOND,
    });
    done();
  });

  /**
   * A scrape's reader of one backlog (`what`: the outbox, webhook deliveries), each query bounded
   * by a timeout; a failure is logged once per outage, not per scrape, and the recovery once.
   */
  const backlogReader = (
    what: string,
    queries: { counts: () => Promise<{ pending: number; dead: number }>; oldest: () => Promise<Date | null> },
  ): [BacklogReader, (err: unknown) => void] => {
    let unreadable = false;
    const readable = <T>(value: T): T => {
      if (unreadable) app.log.info(`${what} metrics readable again`);
      unreadable = false;
      return value;
    };
    return [
      {
        counts: async () => readable(await withTimeout(queries.counts(), OUTBOX_QUERY_TIMEOUT_MS)),
        oldestPendingAgeSeconds: async () => {
          const oldest = readable(await withTimeout(queries.oldest(), OUTBOX_QUERY_TIMEOUT_MS));
          return oldest === null ? 0 : Math.max(0, (clock.now().getTime() - oldest.getTime()) / MS_PER_SECOND);
        },
      },
      (err) => {
        if (!unreadable) app.log.warn({ err: { message: err instanceof Error ? err.message : String(err) } }, `${what} metrics unavailable: the database cannot be read`);
        unreadable = true;
      },
    ];
  };
  metrics.trackOutbox(...backlogReader('outbox', { counts: () => countOutboxBacklog(db), oldest: () => oldestPendingEmailCreatedAt(db) }));
  metrics.trackWebhooks(...backlogReader('webhook', { counts: () => countDeliveryBacklog(db), oldest: () => oldestPendingDeliveryCreatedAt(db) }));

  if (deps.serveRoute) {
    app.get(
      METRICS_PATH,
      {
        config: { quietRequestLog: true },
        schema: {
          summary: 'Prometheus metrics (text exposition format)',
          operationId: 'getMetrics',
          tags: [TAGS.operations.name],
          response: {
            200: {
              content: {
                [metrics.registry.contentType]: {
                  schema: Type.String({
                    examples: ['# HELP process_cpu_user_seconds_total Total user CPU time spent in seconds.\n# TYPE process_cpu_user_seconds_total counter\nprocess_cpu_user_seconds_total 0.42\n'],
                  }),
                },
              },
            },
            ...errorResponses(),
          },
        },
      },
      async (_request, reply) => sendMetrics(metrics, reply),
    );
  }
  app.addHook('onClose', async () => {
    await Promise.all((metricsServers.get(app) ?? []).map((server) => server.close()));
  });
}

/**
 * Serves `GET /metrics` of `app` on a port of its own (METRICS_PORT), so the scrape endpoint
 * can stay off the public listener. The small server logs through the app's logger, answers
 * anything else 404 `request.not_found`, and closes when `app` closes.
 * @returns the listening metrics server.
 * @throws the listen error (port taken).
 */
export async function listenMetrics(app: FastifyInstance, options: { readonly host: string; readonly port: number }): Promise<FastifyInstance> {
  const server = Fastify({ loggerInstance: app.log.child({ server: 'metrics' }), ...slowClientServerOptions(), ...requestLogServerOptions() });
  server.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    reply.header('x-content-type-options', 'nosniff');
  });
  server.get(METRICS_PATH, async (_request, reply) => sendMetrics(app.metrics, reply));
  server.setNotFoundHandler((_request, reply) => sendError(reply, 'request.not_found'));
  metricsServers.set(app, [...(metricsServers.get(app) ?? []), server]);
  await server.listen({ host: options.host, port: options.port });
  return server;
}
