import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import fastifyCors from '@fastify/cors';
import { ERROR_CATALOG } from '../errors.js';
import { sendError } from './error-handler.js';

/** The HTTP methods of the interface (spec §4): what a CORS preflight may ask for. */
export const CORS_METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'DELETE'];

/** The JSON content type of every body this service writes. */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * Headers every answer carries (docs/decisions.md, "Caching"): `Cache-Control: no-store` unless
 * the route set its own policy (only the JWKS does: `public, max-age=300`, spec §4), and
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
 * (`{error, message, statusCode}`) is not the spec's Error (§7).
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

/** Trims an `email` member of a body or query object in place (decisions.md §3). */
function trimEmailMember(input: unknown): void {
  if (input !== null && typeof input === 'object' && 'email' in input && typeof input.email === 'string') {
    (input as { email: string }).email = input.email.trim();
  }
}

/**
 * HTTP behaviour shared by every route (docs/decisions.md, "HTTP hardening"): CORS only for
 * `corsOrigins`, 503 `service_unavailable` for requests arriving while the server closes, emails
 * trimmed before validation, and the common response headers.
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
    });
  }
  // Load shedding while closing (after CORS, so a browser app can read the answer): requests
  // still arriving on open keep-alive connections get 503 `service_unavailable` with
  // `Connection: close` (set by Fastify), and no handler runs.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // The hooks of every request are callback-style, not async: an async hook costs a promise and
  // a microtask per request (docs/performance.md).
  app.addHook('onRequest', (_request, reply, done) => {
    // Answered here: `done` is not called, so no handler runs.
    if (closing) sendError(reply, 'service_unavailable');
    else done();
  });
  // decisions.md §3: emails are trimmed. Trim before validation so that the email format check
  // sees the trimmed address (body and query alike).
  app.addHook('preValidation', (request, _reply, done) => {
    trimEmailMember(request.body);
    trimEmailMember(request.query);
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    // Nothing this service answers may be cached by default; JWKS sets its own public policy.
    setResponseSecurityHeaders(reply);
    done(null, payload);
  });
}
