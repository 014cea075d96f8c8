import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Db } from '../db/db.js';
import { schemaStatus } from '../db/migrate.js';
import { errorResponses } from '../errors.js';
import { sendError } from './error-handler.js';
import { TAGS } from './openapi.js';

/** Liveness probe path, outside the API prefix (docs/api.md#healthz). */
export const LIVENESS_PATH = '/healthz';
/** Readiness probe path, outside the API prefix. */
export const READINESS_PATH = '/readyz';

/**
 * Longest a readiness check may wait for the database. Probes usually time out after 1 to 10 s
 * (Kubernetes: 1 s by default); answering 503 after 2 s is better than no answer, and a hung
 * connection attempt must not pile up probes.
 */
export const READINESS_TIMEOUT_MS = 2_000;

/** Why the service is not ready; the public 503 message (no internals, docs/api.md#error-body). */
const NOT_READY_MESSAGES = {
  database: 'The database cannot be reached.',
  schema: 'The database schema is behind this version of the service; run the migrations.',
} as const;

/** Rejects with `Error('timed out')` when `promise` has not settled within `ms` milliseconds (it is not cancelled). */
export async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Where the database stands for readiness: `undefined` when `SELECT 1` answers and the schema
 * is at or past the newest migration this code ships (a newer schema is fine: migrations run
 * before a new version starts, while old instances still serve, docs/operations.md "Migrations
 * before a new version starts"); else why not.
 */
export async function readinessProblem(db: Db): Promise<keyof typeof NOT_READY_MESSAGES | undefined> {
  const started = Date.now();
  try {
    await withTimeout(db.query('SELECT 1'), READINESS_TIMEOUT_MS);
  } catch {
    // Once more, at once, unless the first try used up the time: a pooled connection the
    // database dropped while it was away fails its first query and leaves the pool; a database
    // that is back answers on a new one.
    if (Date.now() - started >= READINESS_TIMEOUT_MS) return 'database';
    try {
      await withTimeout(db.query('SELECT 1'), READINESS_TIMEOUT_MS);
    } catch {
      return 'database';
    }
  }
  try {
    const status = await withTimeout(schemaStatus(db), READINESS_TIMEOUT_MS);
    return status.current >= status.latest ? undefined : 'schema';
  } catch {
    // The query failed after SELECT 1 worked: the connection went away, or no version table.
    return 'database';
  }
}

const LivenessSchema = Type.Object({ status: Type.Literal('ok') }, { additionalProperties: false, examples: [{ status: 'ok' }] });
const ReadinessSchema = Type.Object({ status: Type.Literal('ready') }, { additionalProperties: false, examples: [{ status: 'ready' }] });

/**
 * `GET /healthz`: 200 `{"status":"ok"}` while the process serves HTTP (no dependency checked,
 * so a database outage never makes an orchestrator restart healthy instances).
 * `GET /readyz`: 200 `{"status":"ready"}` when the database answers and its schema is current,
 * else 503 `{code: 'service_unavailable', message}`; a change of state is logged once (warn
 * when it becomes unready, info when it recovers), not every probe.
 *
 * Both are outside `/auth/v0`, carry `Cache-Control: no-store` (the app's default), are in the
 * OpenAPI document under Operations, and are logged at `debug` when they succeed (see request-log.ts).
 * While the server closes they answer 503 like every route.
 */
export async function registerHealthRoutes(app: FastifyInstance, deps: { readonly db: Db }): Promise<void> {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();
  routes.get(
    LIVENESS_PATH,
    {
      config: { quietRequestLog: true },
      schema: {
        summary: 'Liveness: 200 while the process serves HTTP',
        operationId: 'getLiveness',
        tags: [TAGS.operations.name],
        response: { 200: LivenessSchema, ...errorResponses() },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  let lastProblem: string | undefined;
  routes.get(
    READINESS_PATH,
    {
      config: { quietRequestLog: true },
      schema: {
        summary: 'Readiness: 200 when the database answers and its schema is current',
        operationId: 'getReadiness',
        tags: [TAGS.operations.name],
        response: { 200: ReadinessSchema, ...errorResponses() },
      },
    },
    async (request, reply) => {
      const problem = await readinessProblem(deps.db);
      if (problem !== lastProblem) {
        if (problem === undefined) request.log.info({ previous: lastProblem }, 'ready');
        else request.log.warn({ problem }, 'not ready');
        lastProblem = problem;
      }
      if (problem !== undefined) return sendError(reply, 'service_unavailable', NOT_READY_MESSAGES[problem]);
      return { status: 'ready' as const };
    },
  );
}
