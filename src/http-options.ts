import type { FastifyServerOptions } from 'fastify';

/** Largest accepted request body in bytes; larger ones answer 413 `request.body_too_large`. */
export const BODY_LIMIT_BYTES = 16 * 1024;

/**
 * Ajv options for request validation, shared by production and tests, the public app and the
 * admin app: unknown members are rejected (`additionalProperties: false` with
 * `removeAdditional: false`), never stripped, and no type is coerced (a number is not a password).
 */
export const AJV_OPTIONS = {
  customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false },
} as const satisfies FastifyServerOptions['ajv'];
