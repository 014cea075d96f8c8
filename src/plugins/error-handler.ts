import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ERROR_CATALOG, type ErrorCode } from '../errors.js';
import './route-config.js';

/**
 * Driver error codes that mean "the database cannot answer now" (answered 503, docs/reliability.md): socket
 * errors, SQLSTATE class 08 (connection exception), 57P01-03 (server shutting down or starting),
 * 57014 (statement cancelled by `statement_timeout`, src/db/pg.ts), 53300 (too many connections),
 * and class 40 (40001 serialization failure, 40P01 deadlock detected): the server rolled the
 * transaction back whole, so nothing was written and the client may try again. The service's
 * statements take their locks in one order so as never to deadlock (docs/decisions.md); should
 * one still happen, it is a 503, never a 500.
 */
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', '57P01', '57P02', '57P03', '57014', '53300', '08000', '08001', '08003', '08004', '08006', '40001', '40P01']);
/** pg's own errors without a code: a dropped or timed-out connection, the client-side `query_timeout`, a pool already ended. */
const UNAVAILABLE_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|Client was closed and is not queryable|Cannot use a pool after calling end|PGlite is closed/i;

/** Longest validation message answered; Ajv's messages name the field and rule, never the value. */
const MAX_MESSAGE_LENGTH = 300;

function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return (typeof e.code === 'string' && UNAVAILABLE_CODES.has(e.code)) || (typeof e.message === 'string' && UNAVAILABLE_MESSAGES.test(e.message));
}

/** Answers `{code, message}` with the catalog status of `code`; `message` defaults to the catalog's. */
export function sendError(reply: FastifyReply, code: ErrorCode, message?: string): FastifyReply {
  const entry = ERROR_CATALOG[code];
  return reply.code(entry.status).type('application/json; charset=utf-8').send({ code, message: message ?? entry.message });
}

/**
 * Turns every failure into `{code, message}` with the catalog's status (decisions.md §7):
 * AppError as thrown; schema, JSON and content-type failures as the route's
 * `*.validation_failed` (400); oversized bodies as 413; database outages as 503; anything
 * else as 500 `internal_error` with the cause logged, never sent.
 */
export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | AppError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
      return sendError(reply, err.code, err.message);
    }
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendError(reply, 'request.body_too_large');
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      const validationError = request.routeOptions.config.validationError;
      if (validationError !== undefined) {
        return sendError(reply, validationError, `${ERROR_CATALOG[validationError].message} ${err.message}`.slice(0, MAX_MESSAGE_LENGTH));
      }
      request.log.info({ err: { code: err.code, message: err.message } }, 'rejected malformed request');
      return sendError(reply, 'request.invalid');
    }
    if (isDatabaseUnavailable(err)) {
      request.log.error({ err }, 'database unavailable');
      return sendError(reply, 'service_unavailable');
    }
    request.log.error({ err }, 'unhandled error');
    return sendError(reply, 'internal_error');
  });

  app.setNotFoundHandler((_request, reply) => sendError(reply, 'request.not_found'));
}
