import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, FastifySchemaValidationError } from 'fastify';
import { AppError, ERROR_CATALOG, ruleOf, wireCode, type ErrorCode } from '../errors.js';
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

/** Longest validation message answered; messages name the field and its rule, never the value. */
const MAX_MESSAGE_LENGTH = 300;

/** Longest unknown member name repeated in a message ("unknown member \"...\""), in characters. */
const MAX_MEMBER_NAME_LENGTH = 40;

/** What a failed `type` keyword asks for, in words. */
const TYPE_WORDS: Readonly<Record<string, string>> = {
  string: 'a string',
  number: 'a number',
  integer: 'a whole number',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'a JSON array',
  null: 'null',
};

/** What a failed `format` keyword asks for, in words. */
const FORMAT_WORDS: Readonly<Record<string, string>> = {
  email: 'an email address',
  uuid: 'a UUID',
  'date-time': 'a date and time (RFC 3339)',
  uri: 'a URI',
};

/** How the part of the request a validation error is about is named when the error is about all of it. */
const PART_NAMES: Readonly<Record<string, string>> = { body: 'body', querystring: 'query', params: 'path', headers: 'headers' };

/** Fastify's own 4xx errors on a route that reads a body, in plain words. */
const FASTIFY_MESSAGES: Readonly<Record<string, string>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'body must be valid JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'body must be a JSON object',
};

/** `/a/0/b~1c` (an Ajv instancePath, a JSON Pointer, RFC 6901) as `a[0].b/c`; `undefined` for the whole part. */
function fieldName(instancePath: string): string | undefined {
  if (instancePath === '') return undefined;
  return instancePath
    .slice(1)
    .split('/')
    .map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'))
    .map((token, i) => (/^[0-9]+$/.test(token) ? `[${token}]` : i === 0 ? token : `.${token}`))
    .join('');
}

/** `a`, `a or b`, `a, b or c`. */
function orList(words: readonly string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

/** `a`, `a and b`, `a, b and c`. */
function andList(words: readonly string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`;
}

/**
 * When `root` is an `anyOf` of closed objects (a TypeBox `Union`, such as the second sign-in
 * step's `{code}` or `{recovery_code}`), each alternative's own members: those no other
 * alternative has. Undefined for any other schema.
 */
function alternativeMembers(root: unknown): string[][] | undefined {
  const anyOf = (root as { anyOf?: unknown } | null | undefined)?.anyOf;
  if (!Array.isArray(anyOf) || anyOf.length < 2) return undefined;
  const members: string[][] = [];
  for (const branch of anyOf as unknown[]) {
    const b = branch as { type?: unknown; properties?: unknown; additionalProperties?: unknown } | null;
    if (b === null || typeof b !== 'object' || b.type !== 'object' || b.additionalProperties !== false || b.properties === null || typeof b.properties !== 'object') return undefined;
    members.push(Object.keys(b.properties));
  }
  return members.map((own, i) => own.filter((name) => members.every((other, j) => j === i || !other.includes(name))));
}

/** The schema an Ajv error's keyword belongs to: `#/properties/username/pattern` is `root.properties.username`. */
function schemaOfKeyword(root: unknown, schemaPath: string): unknown {
  const tokens = schemaPath.replace(/^#\/?/, '').split('/').slice(0, -1);
  let node = root;
  for (const token of tokens) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[token.replaceAll('~1', '/').replaceAll('~0', '~')];
  }
  return node;
}

/** The rule a generic keyword states, following the field's name ("must be at most 320 characters"). */
function keywordRule(error: FastifySchemaValidationError): string {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'type': {
      const types = (Array.isArray(params.type) ? params.type : String(params.type).split(',')) as string[];
      return `must be ${orList(types.map((t) => TYPE_WORDS[t] ?? t))}`;
    }
    case 'minLength':
      return params.limit === 1 ? 'must not be empty' : `must be at least ${String(params.limit)} characters`;
    case 'maxLength':
      return `must be at most ${String(params.limit)} characters`;
    case 'format':
      return `must be ${FORMAT_WORDS[String(params.format)] ?? `a valid ${String(params.format)}`}`;
    case 'pattern':
      return 'has characters or a form that is not allowed';
    case 'enum':
      return `must be one of ${orList(((params.allowedValues ?? []) as unknown[]).map((v) => JSON.stringify(v)))}`;
    case 'const':
      return `must be ${JSON.stringify(params.allowedValue)}`;
    case 'minimum':
      return `must be at least ${String(params.limit)}`;
    case 'maximum':
      return `must be at most ${String(params.limit)}`;
    case 'minItems':
      return `must have at least ${String(params.limit)} items`;
    case 'maxItems':
      return `must have at most ${String(params.limit)} items`;
    default:
      return 'is invalid';
  }
}

/**
 * The 400 message of a schema validation failure, in plain words: the field and its rule, never
 * Ajv's text (which quotes patterns and keywords) and never the value.
 *
 * - a value of the wrong JSON type: "<field> must be a string" (or the type asked for), so that
 *   `"password": 12345678` is not told it has the wrong length;
 * - a field with a rule from `withRule` (src/errors.ts): "<field> <rule>", whatever other keyword failed;
 * - a missing field: "<field> is required"; none of the alternatives of an `anyOf` of required
 *   fields (sign-up's email or phone): "email or phone is required";
 * - members of two alternatives of a body that takes one of them (the second sign-in step's
 *   `code` and `recovery_code`): "body must have exactly one of code and recovery_code", whatever
 *   their values (Ajv would name the other alternative's member as unknown);
 * - an unknown member: `unknown member "<name>"` (unknown members are refused, never stripped);
 * - the whole body not an object: "body must be a JSON object";
 * - anything else: "<field> " and the failed keyword's rule in words ("must be a string").
 *
 * @param errors Ajv's errors (`allErrors: false`: one failure, after the failed branches of an `anyOf`).
 * @param part which part of the request failed (`body`, `querystring`, ...).
 * @param root the route's schema of that part, where the rules are read.
 * @param data that part of the request as parsed (the JSON body), read for the members it names only.
 */
export function validationMessage(errors: readonly FastifySchemaValidationError[], part: string, root: unknown, data?: unknown): string {
  const alternatives = alternativeMembers(root);
  if (alternatives !== undefined && data !== null && typeof data === 'object' && !Array.isArray(data)) {
    const named = alternatives.filter((own) => own.some((name) => Object.hasOwn(data, name)));
    if (named.length > 1) return `${PART_NAMES[part] ?? part} must have exactly one of ${andList(alternatives.flat())}`;
  }
  const anyOf = errors.find((e) => e.keyword === 'anyOf');
  const branches = anyOf === undefined ? [] : errors.filter((e) => e.schemaPath.startsWith(`${anyOf.schemaPath}/`));
  if (anyOf !== undefined && branches.length > 0 && branches.every((e) => e.keyword === 'required')) {
    const missing = branches.map((e) => fieldName(`${e.instancePath}/${String((e.params as { missingProperty?: unknown }).missingProperty)}`)!);
    return `${orList(missing)} is required`;
  }
  const whole = PART_NAMES[part] ?? part;
  const error = errors.find((e) => e !== anyOf) ?? errors[0];
  if (error === undefined) return `${whole} is invalid`;
  const field = fieldName(error.instancePath);
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'required') {
    return `${fieldName(`${error.instancePath}/${String(params.missingProperty)}`)!} is required`;
  }
  if (error.keyword === 'additionalProperties') {
    const name = Array.from(String(params.additionalProperty));
    const shown = name.length > MAX_MEMBER_NAME_LENGTH ? `${name.slice(0, MAX_MEMBER_NAME_LENGTH).join('')}…` : name.join('');
    return field === undefined ? `unknown member ${JSON.stringify(shown)}` : `${field} has an unknown member ${JSON.stringify(shown)}`;
  }
  const rule = error.keyword === 'type' ? undefined : ruleOf(schemaOfKeyword(root, error.schemaPath));
  return `${field ?? whole} ${rule ?? keywordRule(error)}`;
}

/** The parsed part of `request` a validation error is about (`body`, `querystring`, `params`, `headers`). */
function partData(request: FastifyRequest, part: string): unknown {
  if (part === 'body') return request.body;
  if (part === 'querystring') return request.query;
  if (part === 'params') return request.params;
  return part === 'headers' ? request.headers : undefined;
}

function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return (typeof e.code === 'string' && UNAVAILABLE_CODES.has(e.code)) || (typeof e.message === 'string' && UNAVAILABLE_MESSAGES.test(e.message));
}

/** Answers `{code, message}` with the catalog status of `code`; `message` defaults to the catalog's. */
export function sendError(reply: FastifyReply, code: ErrorCode, message?: string): FastifyReply {
  const entry = ERROR_CATALOG[code];
  return reply.code(entry.status).type('application/json; charset=utf-8').send({ code: wireCode(code), message: message ?? entry.message });
}

/**
 * Turns every failure into `{code, message}` with the catalog's status (docs/api.md#error-codes):
 * AppError as thrown; schema, JSON and content-type failures as the route's
 * `*.validation_failed` (400) with a message in plain words ({@link validationMessage});
 * oversized bodies as 413; database outages as 503; anything else as 500 `internal_error`
 * with the cause logged, never sent. Unknown routes answer 404 `request.not_found`, or what
 * `options.notFound` answers (the admin API's `admin.not_found`, after its key check).
 */
export function registerErrorHandler(app: FastifyInstance, options: { readonly notFound?: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply> } = {}): void {
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
        const part = err.validationContext ?? 'body';
        const message =
          err.validation !== undefined
            ? validationMessage(err.validation, part, request.routeOptions.schema?.[part as keyof FastifySchema], partData(request, part))
            : (FASTIFY_MESSAGES[err.code] ?? err.message);
        return sendError(reply, validationError, message.slice(0, MAX_MESSAGE_LENGTH));
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

  app.setNotFoundHandler(options.notFound ?? ((_request, reply) => sendError(reply, 'request.not_found')));
}
