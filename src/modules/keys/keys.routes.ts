import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import { TAGS } from '../../plugins/openapi.js';
import type { KeyStore } from './keys.service.js';

/** JWKS cache lifetime in seconds (docs/api.md#jwks). */
export const JWKS_MAX_AGE_SECONDS = 300;

/** The JWKS (docs/api.md#jwks): `keys` with RSA public members; other members allowed. */
export const JwksSchema = Type.Object(
  {
    keys: Type.Array(
      Type.Object(
        { kty: Type.String(), kid: Type.String(), use: Type.String(), alg: Type.String(), n: Type.String(), e: Type.String() },
        { additionalProperties: true },
      ),
    ),
  },
  {
    title: 'Jwks',
    additionalProperties: true,
    examples: [
      {
        keys: [
          {
            kty: 'RSA',
            kid: '6D7soijf6RurWKUeGXoibcOkVsxVfankVgiYkqyPJdU',
            use: 'sig',
            alg: 'RS256',
            n: 'tkniyQUZEMibpSQs95zkUPAlgO0XlBxHOB8bpSDZpd_TvRs0oZYuMWwAmun0rbggr_1KXBmOPYP4WdATgTFp1Q7mHO6ASL0MJU4bSuoUiQlqCRMhoB-ywoK5w0yA3p8oE3s6KAvsJ2UTB8FmVHQnGb6FuGLd4FeVeZbIer_4jIXT5Y0HTQzNw7l1-Qgo1qBd7SfBsbRp8AsBmVf0Ke0kKc2J_4cfVFS1Q9xKpZnCJzdZ9aoMr6ltYzeFs0uHccBDb1b-VNiJhMUjFjcWDZJL5QkoRJwnXSUwMYzec6aoGmwWjhLEjndpjSMSV2ccMT6q1A551CzYz9-zMf-psWT10Q',
            e: 'AQAB',
          },
        ],
      },
    ],
  },
);

/** GET /.well-known/jwks.json: the prepared JWKS body, publicly cacheable for 300 s. */
export function keysRoutes(deps: { keys: KeyStore }): FastifyPluginAsyncTypebox {
  const body = deps.keys.jwksJson;
  return async (app) => {
    app.get(
      '/.well-known/jwks.json',
      {
        schema: {
          summary: 'Public signing keys (JWKS, RFC 7517)',
          operationId: 'getJwks',
          tags: [TAGS.keys.name],
          response: { 200: JwksSchema, ...errorResponses() },
        },
      },
      async (_request, reply) =>
        reply
          .header('cache-control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`)
          .type('application/json; charset=utf-8')
          // Pre-serialised once at start; the identity serializer sends it as is.
          .serializer((payload: unknown) => payload as string)
          .send(body as unknown as Static<typeof JwksSchema>),
    );
  };
}
