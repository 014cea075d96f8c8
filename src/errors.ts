import { Type, type TSchema } from '@sinclair/typebox';

/**
 * The error-code catalog (docs/api.md#error-codes): every `{code, message}` the service can answer,
 * with its HTTP status. Errors are data: routes and services throw {@link AppError} with a
 * catalog code, and the error handler turns it into the response. Public messages never
 * carry internals; causes go to the log.
 */
export const ERROR_CATALOG = {
  'auth.sign_up.validation_failed': { status: 400, message: 'The sign-up request is invalid.' },
  'auth.sign_in.validation_failed': { status: 400, message: 'The sign-in request is invalid.' },
  'auth.verify_email.validation_failed': { status: 400, message: 'The verification request is invalid.' },
  'auth.resend_verification.validation_failed': { status: 400, message: 'The resend request is invalid.' },
  'auth.change_password.validation_failed': { status: 400, message: 'The change-password request is invalid.' },
  'auth.delete_account.validation_failed': { status: 400, message: 'The delete-account request is invalid.' },
  'auth.password_reset.validation_failed': { status: 400, message: 'The password-reset request is invalid.' },
  'auth.change_email.validation_failed': { status: 400, message: 'The change-email request is invalid.' },
  'auth.mfa.validation_failed': { status: 400, message: 'The second-factor request is invalid.' },
  'auth.passkeys.validation_failed': { status: 400, message: 'The passkey request is invalid.' },
  'admin.validation_failed': { status: 400, message: 'The admin request is invalid.' },
  'auth.oauth.validation_failed': { status: 400, message: 'The identity-provider request is invalid.' },
  'auth.password.validation_failed': { status: 400, message: 'The password request is invalid.' },
  'auth.oauth.invalid_redirect': { status: 400, message: 'redirect_to is not one of the app pages this service may return to (OAUTH_REDIRECT_URLS).' },
  'auth.oauth.invalid_state': { status: 400, message: 'The sign-in flow is unknown, expired, already used, or was started in another browser: start again.' },
  'auth.missing_access_token': { status: 401, message: 'An access token is required: send Authorization: Bearer <token>.' },
  'auth.invalid_access_token': { status: 401, message: 'The access token is invalid, expired, or its session has ended.' },
  'auth.missing_refresh_token': { status: 401, message: 'The refresh_token cookie is missing.' },
  'auth.invalid_refresh_token': { status: 401, message: 'The refresh token is invalid or its session has ended.' },
  'auth.refresh_token_reused': { status: 401, message: 'The refresh token was already used; the session has been revoked.' },
  'auth.invalid_credentials': { status: 401, message: 'The credentials are invalid.' },
  'auth.invalid_current_password': { status: 401, message: 'The current password is wrong.' },
  'auth.mfa.invalid_code': { status: 401, message: 'The code is wrong, or was already used.' },
  'auth.mfa.missing_challenge': { status: 401, message: 'The mfa_challenge cookie is missing: sign in with the password first.' },
  'auth.mfa.challenge_expired': { status: 401, message: 'The sign-in challenge has expired or had too many wrong codes: sign in again.' },
  'auth.passkeys.invalid_response': { status: 401, message: 'The passkey response does not verify, or its challenge was used or has expired: start again.' },
  'admin.invalid_api_key': { status: 401, message: 'A live admin API key is required in the Authorization header (Bearer).' },
  'auth.passkeys.missing_challenge': { status: 401, message: 'The webauthn_challenge cookie is missing: call /auth/v0/sign-in/passkey/options first.' },
  'auth.reauthentication_required': { status: 401, message: 'This needs a recent sign-in: sign in again, then retry.' },
  'auth.email_not_verified': { status: 403, message: 'The email address has not been verified yet.' },
  'auth.mfa_required': { status: 403, message: 'A second factor is required: send a code to /auth/v0/sign-in/mfa.' },
  'auth.user_banned': { status: 403, message: 'This account is banned.' },
  'auth.session_forbidden': { status: 403, message: 'This session belongs to another user.' },
  'auth.passkeys.forbidden': { status: 403, message: 'This passkey belongs to another user.' },
  'admin.insufficient_scope': { status: 403, message: 'The admin API key does not have the scope this operation needs.' },
  'auth.identities.forbidden': { status: 403, message: 'This identity belongs to another user.' },
  'auth.verify_email.user_not_found': { status: 404, message: 'No user has this email address.' },
  'auth.session_not_found': { status: 404, message: 'The session does not exist.' },
  'auth.passkeys.not_found': { status: 404, message: 'The passkey does not exist.' },
  'auth.oauth.unknown_provider': { status: 404, message: 'No identity provider has this id.' },
  'auth.identities.not_found': { status: 404, message: 'The identity does not exist.' },
  'request.not_found': { status: 404, message: 'No such route.' },
  'admin.user_not_found': { status: 404, message: 'The user does not exist.' },
  'admin.not_found': { status: 404, message: 'No such resource.' },
  // Not an operation's own code (docs/api.md#status-codes): a malformed request that no operation's validation code fits (a bad
  // Content-Type header on a route without a body; malformed HTTP, also answered 408 or 431).
  'request.invalid': { status: 400, message: 'The request is malformed.' },
  'auth.sign_up.username_taken': { status: 409, message: 'The username is already taken.' },
  'auth.sign_up.email_taken': { status: 409, message: 'The email address is already registered.' },
  'auth.sign_up.phone_taken': { status: 409, message: 'The phone number is already registered.' },
  'auth.change_email.email_taken': { status: 409, message: 'The email address is already registered.' },
  'auth.mfa.already_enabled': { status: 409, message: 'A second factor is already enabled; disable it first.' },
  'admin.username_taken': { status: 409, message: 'The username is already taken.' },
  'admin.email_taken': { status: 409, message: 'The email address is already registered.' },
  'admin.phone_taken': { status: 409, message: 'The phone number is already registered.' },
  'admin.no_email': { status: 409, message: 'The user has no email address to send a reset code to.' },
  'auth.passkeys.limit_reached': { status: 409, message: 'The account has the most passkeys it may have; delete one first.' },
  'auth.identities.last_sign_in_method': { status: 409, message: 'This identity is the last way to sign in to the account: set a password, add a passkey or link another provider first.' },
  'auth.password.already_set': { status: 409, message: 'The account already has a password: use change-password.' },
  'auth.verify_email.code_expired': { status: 410, message: 'There is no active verification code; request a new one.' },
  'auth.verify_email.code_mismatch': { status: 410, message: 'The verification code is wrong.' },
  'auth.verify_email.too_many_attempts': { status: 410, message: 'Too many wrong codes; request a new one.' },
  'auth.password_reset.code_expired': { status: 410, message: 'There is no active password-reset code; request a new one.' },
  'auth.password_reset.code_mismatch': { status: 410, message: 'The password-reset code is wrong.' },
  'auth.password_reset.too_many_attempts': { status: 410, message: 'Too many wrong codes; request a new one.' },
  'auth.change_email.code_expired': { status: 410, message: 'There is no active email-change code; request a new one.' },
  'auth.change_email.code_mismatch': { status: 410, message: 'The email-change code is wrong.' },
  'auth.change_email.too_many_attempts': { status: 410, message: 'Too many wrong codes; request a new one.' },
  'request.body_too_large': { status: 413, message: 'The request body is too large.' },
  'auth.resend_verification.too_many_attempts': { status: 429, message: 'A code was sent recently; try again later.' },
  'auth.sign_in.too_many_attempts': { status: 429, message: 'Too many failed sign-ins; try again later.' },
  'auth.change_password.too_many_attempts': { status: 429, message: 'Too many wrong current passwords; try again later.' },
  'auth.delete_account.too_many_attempts': { status: 429, message: 'Too many wrong passwords; try again later.' },
  'auth.mfa.too_many_attempts': { status: 429, message: 'Too many wrong codes or passwords; try again later.' },
  'auth.passkeys.too_many_attempts': { status: 429, message: 'Too many passkey registrations started; try again later.' },
  'auth.sign_up.too_many_attempts': { status: 429, message: 'Too many sign-ups from this network; try again later.' },
  'admin.too_many_requests': { status: 429, message: 'Too many requests with this admin API key; try again later.' },
  'auth.oauth.too_many_attempts': { status: 429, message: 'Too many sign-ins with an identity provider started from this network; try again later.' },
  // `auth.verify_email.too_many_attempts` is taken by the 410 of a dead code (docs/api.md#error-codes).
  'auth.verify_email.rate_limited': { status: 429, message: 'Too many failed verifications from this network; try again later.' },
  // docs/api.md#password-reset and docs/api.md#change-email answer a rate limit with the same code as
  // a dead code, told apart by the status (429 here, 410 above): `wire` is the code the body carries.
  'auth.password_reset.rate_limited': { status: 429, wire: 'auth.password_reset.too_many_attempts', message: 'Too many password-reset attempts; try again later.' },
  'auth.change_email.rate_limited': { status: 429, wire: 'auth.change_email.too_many_attempts', message: 'Too many email-change attempts; try again later.' },
  internal_error: { status: 500, message: 'Internal error.' },
  service_unavailable: { status: 503, message: 'The service is temporarily unavailable; try again shortly.' },
  'auth.oauth.provider_unavailable': { status: 503, message: 'The identity provider cannot be reached; try again shortly.' },
} as const satisfies Record<string, CatalogEntry>;

/** One catalog entry: the status, the default message, and the code the body carries when it is not the key. */
export interface CatalogEntry {
  readonly status: number;
  readonly message: string;
  /** The body's `code` when two entries share one (told apart by their status); the key otherwise. */
  readonly wire?: string;
}

/** The `code` a response body carries for a catalog entry. */
export function wireCode(code: ErrorCode): string {
  const entry: CatalogEntry = ERROR_CATALOG[code];
  return entry.wire ?? code;
}

export type ErrorCode = keyof typeof ERROR_CATALOG;

/**
 * The codes a provider's callback puts in the `error` query parameter of its redirect to the
 * app (docs/api.md#callback), with what each means: a callback answers its failures in the
 * address the browser lands on, not in a body. Three of them are also catalog codes.
 */
export const CALLBACK_ERRORS = {
  'auth.oauth.provider_error': 'The provider answered with an error (the user declined, or the provider refused the request).',
  'auth.oauth.provider_unavailable': 'The provider could not be reached, or answered the code exchange or a user-information call with a server error.',
  'auth.oauth.invalid_response': 'The code exchange, the ID token, the iss parameter or the user information did not check out.',
  'auth.oauth.email_not_verified': 'The provider gave no verified email address for a new account.',
  'auth.oauth.account_exists': 'A user with the provider\'s email address exists: sign in as before and link the provider from there.',
  'auth.oauth.identity_taken': 'The provider\'s account is already linked to another user.',
  'auth.oauth.link_expired': 'The session that started the link was revoked or expired meanwhile.',
  'auth.email_not_verified': 'The account\'s email address has not been verified yet.',
  'auth.user_banned': 'The account is banned.',
  'auth.mfa_required': 'A second factor is required: the mfa_challenge cookie is set; send a code to /auth/v0/sign-in/mfa.',
} as const;

/** A code of {@link CALLBACK_ERRORS}. */
export type CallbackErrorCode = keyof typeof CALLBACK_ERRORS;

/** The validation-failure codes; a route names one of these in its config as `validationError`. */
export type ValidationErrorCode = Extract<ErrorCode, `${string}.validation_failed`>;

/**
 * A failure with a catalog code. `message` overrides the catalog's default public message
 * (it must still be safe to show); `headers` are added to the response (for example `Retry-After`).
 */
export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    options: { message?: string; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(options.message ?? ERROR_CATALOG[code].message, { cause: options.cause });
    this.name = 'AppError';
    this.status = ERROR_CATALOG[code].status;
    this.headers = options.headers ?? {};
  }
  readonly headers: Record<string, string>;
}

/** The Error body (docs/api.md#error-body): exactly `{code, message}`. */
export const ErrorSchema = Type.Object(
  { code: Type.String({ description: 'Dotted machine-readable code from the catalog.' }), message: Type.String() },
  { $id: 'Error', additionalProperties: false, title: 'Error' },
);

/** Response schemas for the given error statuses, all the Error body; plus 500 and 503 which any route may answer. */
export function errorResponses<S extends number>(...statuses: S[]): Record<S | 500 | 503, typeof ErrorSchema> {
  const out = {} as Record<S | 500 | 503, typeof ErrorSchema>;
  for (const s of [...statuses, 500 as const, 503 as const]) out[s] = ErrorSchema;
  return out;
}

/** Where a request field's rule in plain words is kept on its schema: a symbol, which neither Ajv nor the OpenAPI document reads as a keyword. */
export const FIELD_RULE = Symbol.for('latchkey.fieldRule');

/**
 * A request field's schema with the rule it follows in plain words, written to follow the
 * field's name: `withRule(Type.String({ minLength: 8, maxLength: 72 }), 'must be 8 to 72 characters')`.
 * When the field breaks a keyword of its schema other than its type, the 400 answers
 * "<field> <rule>" ("password must be 8 to 72 characters", src/plugins/error-handler.ts); a value
 * of the wrong type answers "<field> must be a string", rule or not. The OpenAPI document
 * shows the same rule as the field's description. Fields without a rule get a message built
 * from the failed keyword ("username must be a string").
 */
export function withRule<T extends TSchema>(schema: T, rule: string): T {
  return { ...schema, description: `${rule.charAt(0).toUpperCase()}${rule.slice(1)}.`, [FIELD_RULE]: rule };
}

/** The plain-words rule of a field schema made by {@link withRule}, if any. */
export function ruleOf(schema: unknown): string | undefined {
  if (schema === null || typeof schema !== 'object') return undefined;
  const rule = (schema as { [FIELD_RULE]?: unknown })[FIELD_RULE];
  return typeof rule === 'string' ? rule : undefined;
}
