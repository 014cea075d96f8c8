import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { ERROR_CATALOG, errorResponses } from '../../errors.js';
import { clientContextOf } from '../../plugins/client-context.js';
import { TAGS } from '../../plugins/openapi.js';
import { SignInMfaRequestSchema } from '../mfa/mfa.schemas.js';
import { PasskeySignInRequestSchema, RequestOptionsSchema } from '../passkeys/passkeys.schemas.js';
import { setRefreshCookie } from '../sessions/refresh-cookie.js';
import { SignInRequestSchema, SignInResponseSchema } from '../sessions/sessions.schemas.js';
import type { IssuedTokens } from '../sessions/sessions.service.js';
import { toUser } from '../users/users.schemas.js';
import type { UserRow } from '../users/users.shared.js';
import {
  clearMfaChallengeCookie,
  clearWebauthnChallengeCookie,
  MFA_CHALLENGE_COOKIE,
  setMfaChallengeCookie,
  setWebauthnChallengeCookie,
  WEBAUTHN_CHALLENGE_COOKIE,
} from './challenge-cookies.js';
import type { SignInResult, SignInService } from './sign-in.service.js';

/**
 * The answer of every sign-in that ends in a session (docs/api.md#sign-in): the refresh cookie
 * is set and the body is `{user, session_id, tokens: {access_token}}`.
 */
function sessionAnswer(reply: FastifyReply, issued: IssuedTokens & { user: UserRow }) {
  setRefreshCookie(reply, issued.refreshToken, issued.refreshMaxAgeSeconds);
  return { user: toUser(issued.user), session_id: issued.sessionId, tokens: { access_token: issued.accessToken } };
}

/**
 * The answer of a sign-in that needs its second step (docs/api.md#sign-in-second-step): no
 * session yet, the `mfa_challenge` cookie, and 403 `auth.mfa_required`.
 */
function mfaRequiredAnswer(reply: FastifyReply, result: Extract<SignInResult, { kind: 'mfa_required' }>) {
  setMfaChallengeCookie(reply, result.challenge, result.challengeMaxAgeSeconds);
  return reply.code(403).send({ code: 'auth.mfa_required', message: ERROR_CATALOG['auth.mfa_required'].message });
}

/**
 * The sign-in routes (docs/api.md#sign-in): POST /sign-in (password), /sign-in/mfa (the second
 * step, `mfa_challenge` cookie), /sign-in/passkey/options (sets the `webauthn_challenge`
 * cookie) and /sign-in/passkey. Each ends as every sign-in does: the refresh cookie, or the
 * second step's challenge (an identity provider's callback, oauth.routes.ts, sets the same
 * cookies on its redirect).
 */
export function signInRoutes(deps: { signIn: SignInService }): FastifyPluginAsyncTypebox {
  const { signIn } = deps;
  const tags = [TAGS.signIn.name];
  return async (app) => {
    app.post(
      '/sign-in',
      {
        config: { validationError: 'auth.sign_in.validation_failed' },
        schema: {
          summary: 'Sign in; sets the refresh cookie',
          operationId: 'signIn',
          tags,
          body: SignInRequestSchema,
          response: { 200: SignInResponseSchema, ...errorResponses(400, 401, 403, 413, 429) },
        },
      },
      async (request, reply) => {
        const result = await signIn.password(request.body, clientContextOf(request));
        return result.kind === 'mfa_required' ? mfaRequiredAnswer(reply, result) : sessionAnswer(reply, result);
      },
    );

    app.post(
      '/sign-in/mfa',
      {
        config: { validationError: 'auth.mfa.validation_failed' },
        schema: {
          summary: 'Complete a sign-in with a TOTP code or a recovery code; sets the refresh cookie',
          operationId: 'signInMfa',
          tags,
          security: [{ mfaChallengeCookie: [] }],
          body: SignInMfaRequestSchema,
          response: { 200: SignInResponseSchema, ...errorResponses(400, 401, 403, 413, 429) },
        },
      },
      async (request, reply) => {
        const body = request.body;
        const factor = 'code' in body ? { code: body.code } : { recoveryCode: body.recovery_code };
        const issued = await signIn.secondStep(request.cookies[MFA_CHALLENGE_COOKIE], factor, clientContextOf(request));
        clearMfaChallengeCookie(reply);
        return sessionAnswer(reply, issued);
      },
    );

    app.post(
      '/sign-in/passkey/options',
      {
        config: { validationError: 'auth.passkeys.validation_failed' },
        schema: {
          summary: 'Options for navigator.credentials.get() (discoverable credential); sets the webauthn_challenge cookie',
          operationId: 'passkeySignInOptions',
          tags,
          response: { 200: RequestOptionsSchema, ...errorResponses(429) },
        },
      },
      async (request, reply) => {
        const { options, cookie, maxAgeSeconds } = await signIn.passkeyOptions(clientContextOf(request));
        setWebauthnChallengeCookie(reply, cookie, maxAgeSeconds);
        return options;
      },
    );

    app.post(
      '/sign-in/passkey',
      {
        config: { validationError: 'auth.passkeys.validation_failed' },
        schema: {
          summary: 'Sign in with the response of navigator.credentials.get(); sets the refresh cookie',
          operationId: 'signInWithPasskey',
          tags,
          security: [{ webauthnChallengeCookie: [] }],
          body: PasskeySignInRequestSchema,
          response: { 200: SignInResponseSchema, ...errorResponses(400, 401, 403, 413, 429) },
        },
      },
      async (request, reply) => {
        const cookie = request.cookies[WEBAUTHN_CHALLENGE_COOKIE];
        // The challenge is used up by any try: the cookie is cleared whatever the outcome.
        clearWebauthnChallengeCookie(reply);
        return sessionAnswer(reply, await signIn.passkey(cookie, request.body.response, clientContextOf(request)));
      },
    );
  };
}
