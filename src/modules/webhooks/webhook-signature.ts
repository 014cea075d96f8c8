import { createHmac, randomBytes } from 'node:crypto';

/**
 * Webhook secrets and signatures of the Standard Webhooks specification (docs/api.md#webhook-signature):
 * a secret is `whsec_` and the base64 of 24 to 64 random bytes (these are 32: 256 bits, the
 * strength of HMAC-SHA-256); a signature is `v1,` and the base64 HMAC-SHA-256, under the secret's
 * bytes, of `{webhook-id}.{webhook-timestamp}.{body}`.
 */

/** The prefix of a symmetric webhook secret. */
export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** Random bytes in a new secret: within the specification's 24 to 64, the HMAC-SHA-256 key strength. */
export const WEBHOOK_SECRET_BYTES = 32;

/** A new endpoint secret from the CSPRNG: `whsec_` + base64 of {@link WEBHOOK_SECRET_BYTES} bytes. */
export function newWebhookSecret(): string {
  return `${WEBHOOK_SECRET_PREFIX}${randomBytes(WEBHOOK_SECRET_BYTES).toString('base64')}`;
}

/** The HMAC key of a `whsec_` secret: the bytes its base64 encodes. */
function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : secret, 'base64');
}

/**
 * The `webhook-signature` header of one attempt: a `v1,<base64 HMAC-SHA-256>` signature under each
 * of `secrets` (the current one first, then the previous one during the 24 hours after a
 * rotation), separated by a space.
 * @param message.id the event's id (`webhook-id`); `timestamp` the attempt's Unix seconds (`webhook-timestamp`); `body` the exact bytes sent.
 */
export function webhookSignatureHeader(secrets: readonly string[], message: { id: string; timestamp: number; body: string }): string {
  const signed = `${message.id}.${message.timestamp}.${message.body}`;
  return secrets.map((secret) => `v1,${createHmac('sha256', keyOf(secret)).update(signed, 'utf8').digest('base64')}`).join(' ');
}
