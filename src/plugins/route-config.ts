import type { ValidationErrorCode } from '../errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The catalog code answered (400) when this route's body, query or content type is invalid. */
    validationError?: ValidationErrorCode;
    /** This route reads an `application/x-www-form-urlencoded` body (the `form_post` callback); every other route ignores one. */
    formBody?: boolean;
  }
}

export {};
