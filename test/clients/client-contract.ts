/**
 * The contract between @latchkey/client and the service: for each operation of the client, the
 * route it calls and the TypeBox schemas that route validates its body with and serialises its
 * answer with (the route files under src/modules name the same exported constants). The client
 * declares its wire types by hand (packages/client/src/types.ts, a package without the service's
 * dependencies); two checks keep them from drifting away from these schemas:
 *
 * - at compile time, test/clients/client-contract.types.ts asserts that every method's body and
 *   answer types equal `Static<typeof schema>` (both ways: no member missing, extra, optional
 *   where the schema requires it, or of another type); `npm run typecheck` runs it with the
 *   browser's library (test/clients/tsconfig.contract.json);
 * - at run time, test/clients/client-contract.test.ts checks that each route of this table
 *   exists and documents these very schemas, and test/clients/client-operations.test.ts checks
 *   every answer the client resolves to, in Chromium against the real service, with the table's
 *   answer schema.
 */
import { FormatRegistry, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { DeleteAccountRequestSchema } from '../../src/modules/accounts/accounts.schemas.js';
import { ChangeEmailRequestSchema, ConfirmEmailChangeRequestSchema, ConfirmEmailChangeResponseSchema } from '../../src/modules/email-change/email-change.schemas.js';
import { JwksSchema } from '../../src/modules/keys/keys.routes.js';
import {
  MfaEnableRequestSchema,
  MfaPasswordAndCodeRequestSchema,
  MfaSetupRequestSchema,
  MfaSetupResponseSchema,
  RecoveryCodesResponseSchema,
  SignInMfaRequestSchema,
} from '../../src/modules/mfa/mfa.schemas.js';
import { IdentitiesResponseSchema, LinkRequestSchema, LinkResponseSchema, ProvidersResponseSchema } from '../../src/modules/oauth/oauth.schemas.js';
import {
  PasskeyListResponseSchema,
  PasskeyRegistrationRequestSchema,
  PasskeyRenameRequestSchema,
  PasskeyResponseSchema,
  PasskeySignInRequestSchema,
} from '../../src/modules/passkeys/passkeys.schemas.js';
import { PasswordResetConfirmSchema, PasswordResetRequestSchema } from '../../src/modules/password-reset/password-reset.schemas.js';
import { MeResponseSchema, RefreshResponseSchema, SessionsResponseSchema, SignInRequestSchema, SignInResponseSchema } from '../../src/modules/sessions/sessions.schemas.js';
import { ChangePasswordRequestSchema, SetPasswordRequestSchema, SignUpRequestSchema, SignUpResponseSchema } from '../../src/modules/users/users.schemas.js';
import { ResendVerificationBodySchema, VerifyEmailBodySchema } from '../../src/modules/verification/verification.schemas.js';

/** One route of the service as the client calls it. */
export interface ContractRoute {
  /** HTTP method and path under the service's origin, path parameters as in the route (`:session_id`). */
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  readonly url: string;
  /** The request body schema, if the route takes a body. */
  readonly body?: TSchema;
  /** The success status and its answer schema (null: 204, no body). */
  readonly status: 200 | 201 | 204;
  readonly response: TSchema | null;
}

const route = <const R extends ContractRoute>(r: R): R => r;

/**
 * Every operation of the client that makes a request, by its path on the client object
 * (`'mfa.verify'` is `client.mfa.verify`). `passkeys.register` and `passkeys.signIn` make two
 * requests; the table has their last one, whose body embeds the browser's credential (the
 * client's part of the body is what the types file compares). `refresh` is the TokenKeeper's
 * request (its answer type is RefreshResponse).
 */
export const CLIENT_CONTRACT = {
  signUp: route({ method: 'POST', url: '/auth/v0/sign-up', body: SignUpRequestSchema, status: 201, response: SignUpResponseSchema }),
  verifyEmail: route({ method: 'POST', url: '/auth/v0/verify-email', body: VerifyEmailBodySchema, status: 204, response: null }),
  resendVerification: route({ method: 'POST', url: '/auth/v0/verify-email/resend', body: ResendVerificationBodySchema, status: 204, response: null }),
  signIn: route({ method: 'POST', url: '/auth/v0/sign-in', body: SignInRequestSchema, status: 200, response: SignInResponseSchema }),
  refresh: route({ method: 'POST', url: '/auth/v0/refresh', status: 200, response: RefreshResponseSchema }),
  logout: route({ method: 'POST', url: '/auth/v0/logout', status: 204, response: null }),
  me: route({ method: 'GET', url: '/auth/v0/me', status: 200, response: MeResponseSchema }),
  changePassword: route({ method: 'POST', url: '/auth/v0/change-password', body: ChangePasswordRequestSchema, status: 204, response: null }),
  changeEmail: route({ method: 'POST', url: '/auth/v0/change-email', body: ChangeEmailRequestSchema, status: 204, response: null }),
  confirmEmailChange: route({ method: 'POST', url: '/auth/v0/change-email/confirm', body: ConfirmEmailChangeRequestSchema, status: 200, response: ConfirmEmailChangeResponseSchema }),
  deleteAccount: route({ method: 'POST', url: '/auth/v0/delete-account', body: DeleteAccountRequestSchema, status: 204, response: null }),
  requestPasswordReset: route({ method: 'POST', url: '/auth/v0/password-reset', body: PasswordResetRequestSchema, status: 204, response: null }),
  confirmPasswordReset: route({ method: 'POST', url: '/auth/v0/password-reset/confirm', body: PasswordResetConfirmSchema, status: 204, response: null }),
  'mfa.verify': route({ method: 'POST', url: '/auth/v0/sign-in/mfa', body: SignInMfaRequestSchema, status: 200, response: SignInResponseSchema }),
  'mfa.setUp': route({ method: 'POST', url: '/auth/v0/mfa/totp/setup', body: MfaSetupRequestSchema, status: 200, response: MfaSetupResponseSchema }),
  'mfa.enable': route({ method: 'POST', url: '/auth/v0/mfa/totp/enable', body: MfaEnableRequestSchema, status: 200, response: RecoveryCodesResponseSchema }),
  'mfa.disable': route({ method: 'POST', url: '/auth/v0/mfa/totp/disable', body: MfaPasswordAndCodeRequestSchema, status: 204, response: null }),
  'mfa.regenerateRecoveryCodes': route({ method: 'POST', url: '/auth/v0/mfa/recovery-codes', body: MfaPasswordAndCodeRequestSchema, status: 200, response: RecoveryCodesResponseSchema }),
  'sessions.list': route({ method: 'GET', url: '/auth/v0/sessions', status: 200, response: SessionsResponseSchema }),
  'sessions.revoke': route({ method: 'DELETE', url: '/auth/v0/sessions/:session_id', status: 204, response: null }),
  'sessions.revokeAll': route({ method: 'DELETE', url: '/auth/v0/sessions', status: 204, response: null }),
  'passkeys.register': route({ method: 'POST', url: '/auth/v0/passkeys/registration', body: PasskeyRegistrationRequestSchema, status: 201, response: PasskeyResponseSchema }),
  'passkeys.signIn': route({ method: 'POST', url: '/auth/v0/sign-in/passkey', body: PasskeySignInRequestSchema, status: 200, response: SignInResponseSchema }),
  'passkeys.list': route({ method: 'GET', url: '/auth/v0/passkeys', status: 200, response: PasskeyListResponseSchema }),
  'passkeys.rename': route({ method: 'PATCH', url: '/auth/v0/passkeys/:passkey_id', body: PasskeyRenameRequestSchema, status: 200, response: PasskeyResponseSchema }),
  'passkeys.delete': route({ method: 'DELETE', url: '/auth/v0/passkeys/:passkey_id', status: 204, response: null }),
  providers: route({ method: 'GET', url: '/auth/v0/oauth/providers', status: 200, response: ProvidersResponseSchema }),
  linkProvider: route({ method: 'POST', url: '/auth/v0/oauth/:provider/link', body: LinkRequestSchema, status: 200, response: LinkResponseSchema }),
  identities: route({ method: 'GET', url: '/auth/v0/identities', status: 200, response: IdentitiesResponseSchema }),
  unlinkIdentity: route({ method: 'DELETE', url: '/auth/v0/identities/:identity_id', status: 204, response: null }),
  setPassword: route({ method: 'POST', url: '/auth/v0/password', body: SetPasswordRequestSchema, status: 204, response: null }),
  jwks: route({ method: 'GET', url: '/auth/v0/.well-known/jwks.json', status: 200, response: JwksSchema }),
} as const;

/** An operation's path on the client object. */
export type ContractOperation = keyof typeof CLIENT_CONTRACT;

/**
 * The string formats the contract's schemas use, for TypeBox's Value.Check (which knows none of
 * its own): RFC 9562 UUIDs, RFC 3339 date-times, RFC 3986 URIs, and addresses with an `@` (the
 * service checks addresses on input; an answer only has to be one it stored).
 */
const FORMATS: Record<string, (value: string) => boolean> = {
  uuid: (value) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value),
  'date-time': (value) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value) && !Number.isNaN(Date.parse(value)),
  uri: (value) => URL.canParse(value),
  email: (value) => /^[^@\s]+@[^@\s]+$/.test(value),
};
for (const [name, check] of Object.entries(FORMATS)) if (!FormatRegistry.Has(name)) FormatRegistry.Set(name, check);

/**
 * How an answer the client resolved to for `operation` departs from its route's answer schema:
 * one line per error (path and message), none when it conforms; a 204's answer must be null
 * (the page's `run` turns undefined into null).
 */
export function answerErrors(operation: ContractOperation, answer: unknown): string[] {
  const schema = CLIENT_CONTRACT[operation].response;
  if (schema === null) return answer === null ? [] : [`a 204 resolved to ${JSON.stringify(answer)}`];
  return [...Value.Errors(schema, answer)].map((error) => `${error.path || '/'}: ${error.message}`);
}
