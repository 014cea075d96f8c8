import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import './route-config.js';

function takesBody(request: FastifyRequest): boolean {
  return request.routeOptions.schema?.body !== undefined;
}

/**
 * Request body parsing. Routes that declare a body schema accept only JSON: an empty body
 * becomes `undefined` (so the schema answers "required"), malformed JSON and other content
 * types answer the route's `*.validation_failed` (400, decisions.md §7). Routes that take no
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
    defaultJson(request, text, done);
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
