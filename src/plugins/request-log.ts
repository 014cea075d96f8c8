import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LogController, type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { createRequire } from 'node:module';
import { pino, type DestinationStream } from 'pino';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Log this route's successful requests at `debug`, not `info` (probes and scrapes every few seconds). */
    quietRequestLog?: boolean;
  }
}

/** Header that carries the request id in both directions. */
export const REQUEST_ID_HEADER = 'x-request-id';

/**
 * An incoming request id is kept only when it is a sane token: 1 to 128 characters of
 * `[A-Za-z0-9._-]` (UUIDs, ULIDs, hex trace ids, AWS `Root=`-less ids). Anything else (spaces,
 * quotes, control characters, a list from repeated headers) could forge or break log lines, so
 * the service makes its own.
 */
export const SANE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** Digits kept of `durationMs` (0.001 ms: pino writes the float as is otherwise). */
const DURATION_DECIMALS = 3;
/** First status that is not a success for {@link registerRequestLog}'s `quietRequestLog` routes. */
const FIRST_ERROR_STATUS = 400;

/**
 * The request id of a raw request: its `X-Request-Id` when {@link SANE_REQUEST_ID} accepts it
 * (so a caller or proxy can follow one request through several services), else a random UUID.
 */
export function requestIdOf(req: IncomingMessage): string {
  const incoming = req.headers[REQUEST_ID_HEADER];
  return typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/**
 * Fastify server options for request ids and logging, spread into `Fastify({...})`: ids from
 * {@link requestIdOf} (Fastify's own `requestIdHeader` would take any header value verbatim),
 * logged as `reqId` (the log controller's default label), and Fastify's two lines per request
 * ('incoming request', 'request completed') turned off in favour of {@link registerRequestLog}'s
 * one line. A function, so each server gets its own log controller.
 */
export function requestLogServerOptions(): Pick<FastifyServerOptions, 'genReqId' | 'requestIdHeader' | 'logController'> {
  return {
    genReqId: requestIdOf,
    requestIdHeader: false,
    logController: new LogController({ disableRequestLogging: true }),
  };
}

/** Whether a logger at `loggerLevel` writes lines at `level` (pino's numeric levels; `silent` writes none). */
function levelEnabled(loggerLevel: string, level: 'debug' | 'info'): boolean {
  if (loggerLevel === 'silent') return false;
  const threshold = pino.levels.values[loggerLevel];
  // A level pino does not know (a custom logger's): build the line and let the logger decide.
  return threshold === undefined || threshold <= pino.levels.values[level]!;
}

/** The path of a request without its query string, which can carry a verification code. */
function pathOf(request: FastifyRequest): string {
  const q = request.url.indexOf('?');
  return q === -1 ? request.url : request.url.slice(0, q);
}

/**
 * One JSON line per answered request, at `info`, message `request completed`:
 * `reqId`, `method`, `route` (the pattern, e.g. `/auth/v0/sessions/:session_id`; absent for an
 * unknown path), `path` (no query string), `status`, `durationMs`, `ip`. Never the query string,
 * headers, cookies or bodies. Routes with `config.quietRequestLog` (health, metrics) log their
 * successes at `debug`. Every answer carries the request id in `X-Request-Id`.
 *
 * Register it before any hook that can answer early (the closing 503), so those answers carry
 * the header too.
 */
export function registerRequestLog(app: FastifyInstance): void {
  // Callback-style hooks: no promise per request (docs/performance.md).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    done();
  });
  // At LOG_LEVEL=warn (the setting of docs/performance.md) no line is ever written: no hook
  // then, which every request would run for nothing. The level is the logger's when the app is
  // built (LOG_LEVEL); the service never changes it later.
  if (!levelEnabled(app.log.level, 'info')) return;
  app.addHook('onResponse', (request, reply, done) => {
    const status = reply.statusCode;
    const quiet = request.routeOptions.config.quietRequestLog === true && status < FIRST_ERROR_STATUS;
    if (levelEnabled(request.log.level, quiet ? 'debug' : 'info')) {
      const line = {
        method: request.method,
        route: request.routeOptions.url,
        path: pathOf(request),
        status,
        durationMs: Number(reply.elapsedTime.toFixed(DURATION_DECIMALS)),
        ip: request.ip,
      };
      if (quiet) request.log.debug(line, 'request completed');
      else request.log.info(line, 'request completed');
    }
    done();
  });
}

/**
 * A human-readable log destination for a terminal (pino-pretty: coloured, local time, no pid or
 * hostname). Synchronous, so nothing is lost when the process exits. `createLogger` uses it only
 * when stdout is a TTY; everywhere else the service writes JSON lines.
 * @param output where the pretty lines go; stdout by default (tests pass a stream).
 */
export function prettyDestination(output?: NodeJS.WritableStream): DestinationStream {
  // Loaded on first use: a service writing JSON lines never needs it, and loading it costs
  // about 10 MiB of memory and 35 ms of start (docs/performance.md).
  const pinoPretty = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  return pinoPretty({
    colorize: output === undefined,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    sync: true,
    ...(output === undefined ? {} : { destination: output }),
  });
}
