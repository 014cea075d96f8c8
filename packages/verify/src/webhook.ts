/**
 * Verification of Latchkey's webhook requests (the service's docs/api.md#events-and-webhooks),
 * as the Standard Webhooks specification defines them: headers `webhook-id`, `webhook-timestamp`
 * (Unix seconds) and `webhook-signature` (space-separated `v1,<base64 HMAC-SHA-256>` of
 * `{id}.{timestamp}.{body}` under the endpoint's `whsec_` secret). Interoperates with the
 * `standardwebhooks` npm package both ways.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far `webhook-timestamp` may be from now, either way, by default: 5 minutes (replays of older requests are refused). */
export const DEFAULT_WEBHOOK_TOLERANCE_SECONDS = 300;
const SECRET_PREFIX = 'whsec_';
/** Bytes of an HMAC-SHA-256 signature. */
const SIGNATURE_BYTES = 32;

/** Why a webhook request was refused. */
export type WebhookVerifyErrorCode = 'missing_header' | 'invalid_timestamp' | 'timestamp_out_of_tolerance' | 'invalid_signature' | 'invalid_body' | 'invalid_secret';

/** A refused webhook request: answer 400 (401 for `invalid_signature` if you prefer) and do not process it. */
export class WebhookVerifyError extends Error {
  override readonly name = 'WebhookVerifyError';
  constructor(
    readonly code: WebhookVerifyErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** A Latchkey event as its webhook body carries it. */
export interface WebhookEvent {
  /** The event type, `user.created` for example. */
  readonly type: string;
  /** When the change happened (RFC 3339). */
  readonly timestamp: string;
  /** The event's data; its members depend on `type`. */
  readonly data: Record<string, unknown>;
}

/** A verified webhook request. */
export interface VerifiedWebhook {
  /** `webhook-id`: the event's id, the same on every retry: deduplicate by it. */
  readonly id: string;
  /** `webhook-timestamp`: when this attempt was made, Unix seconds. */
  readonly timestamp: number;
  /** The parsed body. */
  readonly event: WebhookEvent;
}

/** Request headers as Node (`req.headers`), Express, Fastify or the Fetch API (`Headers`) give them. */
export type WebhookHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

export interface VerifyWebhookOptions {
  /** The endpoint's secret (`whsec_...`), or several (any of them may have signed). */
  readonly secret: string | readonly string[];
  /** The request's headers. */
  readonly headers: WebhookHeaders;
  /** The body exactly as received, before any JSON parsing (a string or its bytes). */
  readonly body: string | Uint8Array;
  /** Seconds `webhook-timestamp` may be from now, either way (default 300). */
  readonly toleranceSeconds?: number;
  /** Now (default: the system clock). */
  readonly now?: Date;
}

/** A header's value (the first, when repeated); lower-case names, as Node gives them. */
function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const value = (headers as Record<string, string | readonly string[] | undefined>)[name];
  return typeof value === 'string' ? value : value?.[0];
}

/** The HMAC key of a `whsec_` secret: the bytes its base64 encodes. */
function keyOf(secret: string): Buffer {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  if (key.length === 0) throw new WebhookVerifyError('invalid_secret', 'The secret is not a whsec_ secret.');
  return key;
}

/**
 * Verifies a webhook request from Latchkey and parses its body: the three headers must be
 * present, `webhook-timestamp` within `toleranceSeconds` of now, and one of the `v1` signatures
 * of `webhook-signature` (others are ignored) the HMAC-SHA-256 of `{id}.{timestamp}.{body}` under
 * one of the secrets, compared in constant time. During the 24 hours after a secret rotation the
 * service signs with both secrets, so either one verifies.
 *
 * Deduplicate by the returned `id`: a delivery may arrive more than once.
 * @throws WebhookVerifyError saying why the request is refused.
 */
export function verifyWebhook(options: VerifyWebhookOptions): VerifiedWebhook {
  const id = header(options.headers, 'webhook-id');
  const timestampText = header(options.headers, 'webhook-timestamp');
  const signatures = header(options.headers, 'webhook-signature');
  if (id === undefined || timestampText === undefined || signatures === undefined) {
    throw new WebhookVerifyError('missing_header', 'The webhook-id, webhook-timestamp and webhook-signature headers are required.');
  }
  if (!/^\d{1,12}$/.test(timestampText)) throw new WebhookVerifyError('invalid_timestamp', 'webhook-timestamp is not Unix seconds.');
  const timestamp = Number(timestampText);
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const tolerance = options.toleranceSeconds ?? DEFAULT_WEBHOOK_TOLERANCE_SECONDS;
  if (Math.abs(now - timestamp) > tolerance) throw new WebhookVerifyError('timestamp_out_of_tolerance', 'webhook-timestamp is too far from now.');

  const body = typeof options.body === 'string' ? Buffer.from(options.body, 'utf8') : Buffer.from(options.body.buffer, options.body.byteOffset, options.body.byteLength);
  const signed = Buffer.concat([Buffer.from(`${id}.${timestampText}.`, 'utf8'), body]);
  const secrets = typeof options.secret === 'string' ? [options.secret] : options.secret;
  const expected = secrets.map((secret) => createHmac('sha256', keyOf(secret)).update(signed).digest());
  const given = signatures
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .map((entry) => Buffer.from(entry.slice(3), 'base64'))
    .filter((bytes) => bytes.length === SIGNATURE_BYTES);
  // Every pair is compared, in constant time each, so the time does not tell which one matched.
  let match = false;
  for (const g of given) for (const e of expected) match = timingSafeEqual(g, e) || match;
  if (!match) throw new WebhookVerifyError('invalid_signature', 'No signature of the request matches the secret.');

  let event: unknown;
  try {
    event = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerifyError('invalid_body', 'The body is not JSON.');
  }
  const e = event as Partial<WebhookEvent> | null;
  if (e === null || typeof e !== 'object' || typeof e.type !== 'string' || typeof e.timestamp !== 'string' || typeof e.data !== 'object' || e.data === null) {
    throw new WebhookVerifyError('invalid_body', 'The body is not a Latchkey event ({type, timestamp, data}).');
  }
  return { id, timestamp, event: e as WebhookEvent };
}
