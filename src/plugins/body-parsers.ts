import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import './route-config.js';

/** True when every string in a parsed JSON value is well-formed UTF-16 without NUL, which PostgreSQL text cannot hold. */
function storableStrings(value: unknown): boolean {
  if (typeof value === 'string') return value.isWellFormed() && !value.includes('\u0000');
  if (Array.isArray(value)) return value.every(storableStrings);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).every(([k, v]) => storableStrings(k) && storableStrings(v));
  }
  return true;
}

function takesBody(request: FastifyRequest): boolean {
  return request.routeOptions.schema?.body !== undefined;
}

/**
 * Request body parsing. Routes that declare a body schema accept only JSON: an empty body
 * becomes `undefined` (so the schema answers "required"), malformed JSON and other content
 * types answer the route's `*.validation_failed` (400, docs/api.md#error-codes), and so do strings
 * with NUL or lone surrogates (PostgreSQL text cannot store them). Routes that take no
 * body (refresh, logout, ...) ignore whatever body a client sends, so a browser `fetch` with a
 * stray `Content-Type: application/json` still works. The body limit still applies (413).
 */
export function registerBodyParsers(app: FastifyInstance): void {
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (!takesBody(request) || text === '') {
      done(null, undefined);
      return;
    }
    defaultJson(request, text, (err, parsed) => {
      if (err === null && !storableStrings(parsed)) {
        const code = request.routeOptions.config.validationError ?? 'request.invalid';
        done(new AppError(code, { message: 'Strings must be well-formed Unicode without NUL characters.' }), undefined);
        return;
      }
      done(err, parsed);
    });
  });
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, _body, done) => {
    const code = request.routeOptions.config.validationError;
    if (takesBody(request) && code !== undefined) {
      done(new AppError(code, { message: 'The request body must be JSON with Content-Type: application/json.' }), undefined);
      return;
    }
    done(null, undefined);
  });
}
