/**
 * The Fastify plugin of @latchkey/verify: every route of the scope it is registered in requires
 * a valid access token (`Authorization: Bearer`, RFC 6750 §2.1); `request.auth` holds the
 * verified token, and a refused request is answered 401 (503 when the keys or the session check
 * are unreachable) with the service's Error body (docs/api.md#error-body).
 */
import type { FastifyPluginCallback, FastifyRequest } from 'fastify';
import { errorBodyOf, VerifyError } from './errors.js';
import type { Verifier, VerifiedToken } from './index.js';

export interface LatchkeyFastifyOptions {
  /** From `createVerifier`; one per process. */
  verifier: Verifier;
}

/**
 * Registers an `onRequest` hook (the token is checked before the body is read) and the
 * `request.auth` decorator (null before the hook). It is not encapsulated (like plugins wrapped
 * in fastify-plugin): it protects the routes of the instance it is registered on that are
 * declared after it, so register it inside the plugin that holds the protected routes. Type
 * `request.auth` with `declare module 'fastify' { interface FastifyRequest { auth: VerifiedToken | null } }`
 * or read it through `authOf(request)`.
 */
export const latchkeyAuth: FastifyPluginCallback<LatchkeyFastifyOptions> = Object.assign(
  (fastify: Parameters<FastifyPluginCallback<LatchkeyFastifyOptions>>[0], options: LatchkeyFastifyOptions, done: (err?: Error) => void) => {
    if (!fastify.hasRequestDecorator('auth')) fastify.decorateRequest('auth', null);
    fastify.addHook('onRequest', async (request, reply) => {
      try {
        (request as unknown as { auth: VerifiedToken }).auth = await options.verifier.verifyAuthorization(request.headers.authorization);
      } catch (err) {
        if (!(err instanceof VerifyError)) throw err;
        request.log.info({ verifyError: err.code }, 'access token refused');
        return reply.code(err.status).header('cache-control', 'no-store').send(errorBodyOf(err));
      }
    });
    done();
  },
  { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: '@latchkey/verify' },
);

/** The verified token of a request that passed the hook. Throws when the route is outside the plugin's scope (a programming error). */
export function authOf(request: FastifyRequest): VerifiedToken {
  const auth = (request as unknown as { auth?: VerifiedToken | null }).auth;
  if (auth === undefined || auth === null) throw new Error('this route is not behind the @latchkey/verify plugin');
  return auth;
}
