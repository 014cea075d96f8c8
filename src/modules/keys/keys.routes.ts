import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import { errorResponses } from '../../errors.js';
import type { KeyStore } from './keys.service.js';

/** JWKS cache lifetime in seconds (spec §8). */
export const JWKS_MAX_AGE_SECONDS = 300;

/** Spec §2 Jwks: `keys` with RSA public members; other members allowed. */
const JwksSchema = Type.Object(
  {
    keys: Type.Array(
      Type.Object(
        { kty: Type.String(), kid: Type.String(), use: Type.String(), alg: Type.String(), n: Type.String(), e: Type.String() },
        { additionalProperties: true },
      ),
    ),
  },
  { title: 'Jwks', additionalProperties: true },
);

/** GET /.well-known/jwks.json: the prepared JWKS body, publicly cacheable for 300 s. */
export function keysRoutes(deps: { keys: KeyStore }): FastifyPluginAsyncTypebox {
  const body = deps.keys.jwksJson;
  return async (app) => {
    app.get(
      '/.well-known/jwks.json',
      { schema: { summary: 'Public signing keys (JWKS, RFC 7517)', operationId: 'getJwks', response: { 200: JwksSchema, ...errorResponses() } } },
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
