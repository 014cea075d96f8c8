import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import './route-config.js';

/**
 * Deepest nesting of objects and arrays accepted in a JSON body. The deepest body of the
 * interface, a passkey sign-in, nests 4 levels; a deeper body is refused before it reaches
 * the schema, which then never walks a pathological structure.
 */
export const MAX_JSON_DEPTH = 32;

/** Why a parsed JSON body is refused before schema validation, or `undefined` when it is not. */
function unstorableReason(root: unknown): string | undefined {
  // Iterative, so a deeply nested body can never exhaust the call stack.
  const pending: Array<{ value: unknown; depth: number }> = [{ value: root, depth: 0 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, depth } = next;
    if (typeof value === 'string') {
      if (!value.isWellFormed() || value.includes('\u0000')) return 'Strings must be well-formed Unicode without NUL characters.';
    } else if (value !== null && typeof value === 'object') {
      if (depth === MAX_JSON_DEPTH) return `body must not nest objects and arrays more than ${MAX_JSON_DEPTH} levels deep`;
      if (Array.isArray(value)) {
        for (const item of value) pending.push({ value: item, depth: depth + 1 });
      } else {
        for (const [key, item] of Object.entries(value)) pending.push({ value: key, depth }, { value: item, depth: depth + 1 });
      }
    }
  }
  return undefined;
}

/** True when `text` is JSON that only the parser's prototype-poisoning guard refused. */
function isPoisonedJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function takesBody(request: FastifyRequest): boolean {
  return request.routeOptions.schema?.body !== undefined;
}

/**
 * Request body parsing. Routes that declare a body schema accept only JSON: an empty body
 * becomes `undefined` (so the schema answers "required"), malformed JSON and other content
 * types answer the route's `*.validation_failed` (400, docs/api.md#error-codes), and so do strings
 * with NUL or lone surrogates (PostgreSQL text cannot store them), objects and arrays nested more
 * than {@link MAX_JSON_DEPTH} levels, and the members that the prototype-poisoning guard refuses
 * (`__proto__`; `constructor` with `prototype`), each with its own message. Routes that take no
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
      const reason =
        err === null
          ? unstorableReason(parsed)
          : isPoisonedJson(text)
            ? 'body must not have a member named "__proto__", nor a "constructor" member with a "prototype"'
            : undefined;
      if (reason !== undefined) {
        const code = request.routeOptions.config.validationError ?? 'request.invalid';
        done(new AppError(code, { message: reason }), undefined);
        return;
      }
      done(err, parsed);
    });
  });
  app.removeContentTypeParser('text/plain');
  const notJson = (request: FastifyRequest, done: (err: Error | null, body?: unknown) => void): void => {
    const code = request.routeOptions.config.validationError;
    if (takesBody(request) && code !== undefined) {
      done(new AppError(code, { message: 'The request body must be JSON with Content-Type: application/json.' }), undefined);
      return;
    }
    done(null, undefined);
  };
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, _body, done) => notJson(request, done));
  // A form (an identity provider's `form_post` answer, HTML forms encode it so) is read only by
  // the routes that ask for it, as members of text (a repeated member: an array of them).
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (request, body, done) => {
    if (request.routeOptions.config.formBody !== true) {
      notJson(request, done);
      return;
    }
    const fields: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
    for (const [name, value] of new URLSearchParams(body as string)) {
      const seen = fields[name];
      fields[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
    }
    done(null, fields);
  });
}
