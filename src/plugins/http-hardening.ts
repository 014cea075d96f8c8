import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyHttpOptions, FastifyInstance, FastifyReply, preValidationHookHandler } from 'fastify';
import fastifyCors from '@fastify/cors';
import { ERROR_CATALOG } from '../errors.js';
import { sendError } from './error-handler.js';

/** The HTTP methods of the interface (docs/api.md#operations): what a CORS preflight may ask for. */
export const CORS_METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'];

/**
 * The response headers a script on an allowed origin may read besides the CORS-safelisted ones
 * (Fetch Standard, "CORS-safelisted response-header name"; docs/api.md#cors): `Retry-After`, so
 * that a browser app can wait as long as a 429 asks (RFC 9110 §10.2.3), and `X-Request-Id`, so
 * that it can quote the id under which the service logged its request.
 */
export const CORS_EXPOSED_HEADERS: readonly string[] = ['Retry-After', 'X-Request-Id'];

/** The JSON content type of every body this service writes. */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * Timeouts against slow clients (slowloris and slow-body attacks, OWASP ASVS 5.0 V13.1.4 / CWE-400),
 * in milliseconds. Every request of this interface is small (bodies at most 16 KiB), so a client
 * that needs long to send one is holding a connection, not using the service:
 * - headers must arrive within {@link HEADERS_TIMEOUT_MS} of the connection's first byte;
 * - the whole request, body included, within {@link REQUEST_TIMEOUT_MS}; Node checks both every
 *   {@link TIMEOUT_CHECK_INTERVAL_MS}, so a body trickling in a byte every few seconds is answered
 *   408 and dropped within 27 s;
 * - a socket with no traffic at all is closed after {@link IDLE_SOCKET_TIMEOUT_MS};
 * - an idle keep-alive connection is closed after {@link KEEP_ALIVE_TIMEOUT_MS}.
 */
export const HEADERS_TIMEOUT_MS = 10_000;
export const REQUEST_TIMEOUT_MS = 25_000;
/** How often Node looks for requests past their timeouts (Node's default, 30 s, would let one live up to 55 s). */
export const TIMEOUT_CHECK_INTERVAL_MS = 2_000;
export const IDLE_SOCKET_TIMEOUT_MS = 30_000;
/**
 * Fastify's default, set explicitly: longer than the 60 s idle timeout of common load balancers,
 * so a proxy never reuses a connection this server has just closed.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** The Fastify server options that set the timeouts above; spread into `Fastify({...})`. */
export function slowClientServerOptions(): Pick<FastifyHttpOptions<Server>, 'connectionTimeout' | 'keepAliveTimeout' | 'requestTimeout' | 'http'> {
  return {
    connectionTimeout: IDLE_SOCKET_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    http: { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS },
  };
}

/**
 * Headers every answer carries (docs/decisions.md, "Caching"): `Cache-Control: no-store` unless
 * the route set its own policy (only the JWKS does: `public, max-age=300`, docs/api.md#operations), and
 * `X-Content-Type-Options: nosniff`.
 */
export function setResponseSecurityHeaders(reply: FastifyReply): void {
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  reply.header('x-content-type-options', 'nosniff');
}

/**
 * Answers an HTTP-level client error that never reaches routing (a malformed request line or
 * header, headers over Node's size limit, a request timeout) in the service's own shape: the
 * catalog's `request.invalid` body `{code, message}`, JSON with charset, `no-store` and
 * `nosniff`, then closes the connection. The status is Fastify's default: 408 for a timeout,
 * 431 for oversized headers, else 400. Replaces Fastify's default handler, whose body
 * (`{error, message, statusCode}`) is not the service's Error body (docs/api.md#error-body).
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const status = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const body = JSON.stringify({ code: 'request.invalid', message: ERROR_CATALOG['request.invalid'].message });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
        `Content-Type: ${JSON_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        'Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n' +
        body,
    );
  }
  socket.destroy(err);
}

/** Trims an `email` member of a body or query object in place (docs/api.md#identifiers). */
function trimEmailMember(input: unknown): void {
  if (input !== null && typeof input === 'object' && 'email' in input && typeof input.email === 'string') {
    (input as { email: string }).email = input.email.trim();
  }
}

/**
 * Sets `Cache-Control: no-store` and `X-Content-Type-Options: nosniff` on every answer
 * (docs/decisions.md, "Caching") as its request arrives: register it before any other
 * `onRequest` hook, so that every answer has them, those of a CORS preflight, of an early 503
 * and of an error included (Fastify keeps the headers set before an error). A route with a
 * caching policy of its own (only the JWKS) replaces `Cache-Control` when it answers.
 */
export function registerResponseSecurityHeaders(app: FastifyInstance): void {
  // The hooks of every request are callback-style, not async: an async hook costs a promise and
  // a microtask per request (docs/performance.md).
  app.addHook('onRequest', (_request, reply, done) => {
    setResponseSecurityHeaders(reply);
    done();
  });
}

/**
 * Whether a route's request schema (body or query string) declares a top-level `email` member,
 * in any branch of a union; a schema this cannot read (a `$ref`, a schema id) counts as declaring one.
 */
function declaresEmailMember(schema: unknown): boolean {
  // A schema named by its id (a string) is a reference too.
  if (typeof schema === 'string') return true;
  if (schema === null || typeof schema !== 'object') return false;
  const s = schema as { properties?: Record<string, unknown>; anyOf?: unknown[]; oneOf?: unknown[]; allOf?: unknown[]; $ref?: unknown };
  if (s.$ref !== undefined || (s.properties !== undefined && 'email' in s.properties)) return true;
  return [...(s.anyOf ?? []), ...(s.oneOf ?? []), ...(s.allOf ?? [])].some(declaresEmailMember);
}

/**
 * HTTP behaviour shared by every route (docs/decisions.md, "HTTP hardening"): CORS only for
 * `corsOrigins`, 503 `service_unavailable` for requests arriving while the server closes, and
 * emails trimmed before validation. Register it before the routes, after
 * {@link registerResponseSecurityHeaders}.
 */
export async function registerHttpHardening(app: FastifyInstance, options: { corsOrigins: readonly string[] }): Promise<void> {
  if (options.corsOrigins.length > 0) {
    const allowedOrigins = new Set(options.corsOrigins);
    await app.register(fastifyCors, {
      // A listed origin is echoed back with credentials allowed (never `*`). Any other origin,
      // or none, gets no CORS header at all (not even Access-Control-Allow-Credentials), and its
      // preflight falls through to the 404 handler. `Vary: Origin` is always sent, so caches
      // (the JWKS is publicly cacheable) keep the variants apart.
      origin: (origin, callback) => callback(null, origin !== undefined && allowedOrigins.has(origin) ? origin : false),
      credentials: true,
      methods: [...CORS_METHODS],
      // Sent on the actual answers (errors and 429s included), not on preflights.
      exposedHeaders: [...CORS_EXPOSED_HEADERS],
    });
  }
  // Load shedding while closing (after CORS, so a browser app can read the answer): requests
  // still arriving on open keep-alive connections get 503 `service_unavailable` with
  // `Connection: close` (set by Fastify), and no handler runs.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', (_request, reply, done) => {
    // Answered here: `done` is not called, so no handler runs.
    if (closing) sendError(reply, 'service_unavailable');
    else done();
  });
  // docs/api.md#identifiers: emails are trimmed. Trim before validation so that the email format
  // check sees the trimmed address (body and query alike). Only routes whose body or query string
  // declares an `email` member get the hook: no other route reads one (`/me` and the other Bearer
  // routes), and the hook would cost each of their requests a call.
  const trimEmails: preValidationHookHandler = (request, _reply, done) => {
    trimEmailMember(request.body);
    trimEmailMember(request.query);
    done();
  };
  app.addHook('onRoute', (route) => {
    if (!declaresEmailMember(route.schema?.body) && !declaresEmailMember(route.schema?.querystring)) return;
    const own = route.preValidation;
    route.preValidation = own === undefined ? [trimEmails] : [trimEmails, ...(Array.isArray(own) ? own : [own])];
  });
}
