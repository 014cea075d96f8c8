/** The error of @latchkey/verify: why a token was refused. */

/**
 * Why a token was refused. `unavailable` is the only one that is not the token's fault: the JWKS
 * or the session check could not be reached (answer 503 and let the client try again).
 */
export type VerifyErrorCode =
  | 'missing_token'
  | 'malformed'
  | 'algorithm_not_allowed'
  | 'invalid_type'
  | 'unknown_key'
  | 'invalid_signature'
  | 'expired'
  | 'not_yet_valid'
  | 'invalid_issuer'
  | 'invalid_audience'
  | 'invalid_claims'
  | 'session_inactive'
  | 'unavailable';

/** A refused token. `status` is the HTTP status a resource server should answer: 401, or 503 for `unavailable`. */
export class VerifyError extends Error {
  override readonly name = 'VerifyError';
  readonly code: VerifyErrorCode;
  readonly status: 401 | 503;
  constructor(code: VerifyErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.status = code === 'unavailable' ? 503 : 401;
  }
}

/** The Error body of the service (docs/api.md#error-body): exactly `code` and `message`. */
export interface ErrorBody {
  readonly code: 'auth.missing_access_token' | 'auth.invalid_access_token' | 'service_unavailable';
  readonly message: string;
}

/**
 * The answer a resource server gives for a refused token: the service's own codes and messages
 * (docs/api.md#bearer-authentication, docs/api.md#error-codes), so that one client handles both
 * alike; @latchkey/client refreshes once on `auth.invalid_access_token`. No reason is given to
 * the caller beyond that; `VerifyError.code` is for the resource server's log.
 */
export function errorBodyOf(err: VerifyError): ErrorBody {
  if (err.code === 'missing_token') return { code: 'auth.missing_access_token', message: 'An access token is required: send Authorization: Bearer <token>.' };
  if (err.code === 'unavailable') return { code: 'service_unavailable', message: 'The service is temporarily unavailable; try again shortly.' };
  return { code: 'auth.invalid_access_token', message: 'The access token is invalid, expired, or its session has ended.' };
}
