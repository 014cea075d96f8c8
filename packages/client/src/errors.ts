/**
 * The error every operation of @latchkey/client throws: the service's Error body
 * (docs/api.md#error-body) with the HTTP status and `Retry-After`, or a network failure.
 */
export class LatchkeyError extends Error {
  override readonly name = 'LatchkeyError';
  /**
   * The service's `code` (docs/api.md#error-codes), such as `auth.invalid_credentials`; or
   * `client.network_error` when no answer arrived (status 0), or `client.unexpected_response`
   * for an answer without an Error body; or, for a passkey ceremony the browser did not complete
   * (status 0), `client.passkey_unsupported`, `client.passkey_cancelled`, `client.passkey_exists`
   * or `client.passkey_failed`.
   */
  readonly code: string;
  /** The HTTP status; 0 when no answer arrived, or when the browser stopped before asking (`client.passkey_*`). */
  readonly status: number;
  /** `Retry-After` in seconds (on 429 and some 503), or null. Cross-origin, only when the service exposes it. */
  readonly retryAfter: number | null;
  constructor(code: string, message: string, status: number, retryAfter: number | null = null, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

/** Reads `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP date; seconds from now, or null. */
export function retryAfterOf(res: Response): number | null {
  const value = res.headers.get('retry-after');
  if (value === null) return null;
  if (/^\d+$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** The LatchkeyError of an error answer (its body consumed). */
export async function errorOf(res: Response): Promise<LatchkeyError> {
  let body: { code?: unknown; message?: unknown } = {};
  try {
    body = (await res.json()) as typeof body;
  } catch {
    // not JSON: reported as unexpected below
  }
  return typeof body.code === 'string'
    ? new LatchkeyError(body.code, typeof body.message === 'string' ? body.message : body.code, res.status, retryAfterOf(res))
    : new LatchkeyError('client.unexpected_response', `HTTP ${res.status}`, res.status, retryAfterOf(res));
}

/** The LatchkeyError for a request that got no answer (offline, DNS, refused, CORS). */
export function networkError(cause: unknown): LatchkeyError {
  return new LatchkeyError('client.network_error', 'The auth service could not be reached.', 0, null, { cause });
}
