/**
 * The origin check of a WebAuthn ceremony, done before the library's verification so that a
 * response from a page whose origin is not configured is told so (W3C WebAuthn Level 3 §7.1
 * step 9, §7.2 step 13: the client data's `origin` must be one the relying party expects).
 * @simplewebauthn/server checks the same again; this only gives the refusal its reason.
 */
import { UNPRINTABLE } from '../mail/mail.templates.js';

/** Longest origin repeated in a message, in characters: any real origin fits; a forged one is cut short. */
const MAX_SHOWN_ORIGIN_LENGTH = 100;

/**
 * The members of a response's clientDataJSON (base64url JSON, W3C WebAuthn Level 3 §5.8.1) that
 * the service reads before the library verifies it: `challenge` (to find the stored one) and
 * `origin`; each undefined when it cannot be read or is not a non-empty string.
 */
export function clientDataOf(clientDataJson: string): { challenge: string | undefined; origin: string | undefined } {
  try {
    const parsed = JSON.parse(Buffer.from(clientDataJson, 'base64url').toString('utf8')) as { challenge?: unknown; origin?: unknown } | null;
    const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
    return { challenge: text(parsed?.challenge), origin: text(parsed?.origin) };
  } catch {
    return { challenge: undefined, origin: undefined };
  }
}

/**
 * Why a ceremony's response is refused for its origin: a sentence naming the origin the
 * browser signed (as a JSON string with every control, format and line-separator character
 * escaped, cut to {@link MAX_SHOWN_ORIGIN_LENGTH} characters) and the
 * allowed ones (WEBAUTHN_ORIGINS); undefined when the origin is allowed, or cannot be read (the
 * library then refuses the response for what it is).
 *
 * @param clientDataJson the response's `response.clientDataJSON`, base64url.
 * @param allowed the configured origins, exact (`https://app.example.com`).
 */
export function originRefusal(clientDataJson: string, allowed: readonly string[]): string | undefined {
  const { origin } = clientDataOf(clientDataJson);
  if (origin === undefined || allowed.includes(origin)) return undefined;
  const chars = Array.from(origin);
  const shown = chars.length > MAX_SHOWN_ORIGIN_LENGTH ? `${chars.slice(0, MAX_SHOWN_ORIGIN_LENGTH).join('')}…` : origin;
  // JSON.stringify escapes quotes and C0 controls; C1 controls (U+0085), format characters and
  // U+2028/U+2029 are escaped too, so the origin cannot add a line or hide text in the message.
  const quoted = JSON.stringify(shown).replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `the browser signed the response on origin ${quoted}, which is not one of WEBAUTHN_ORIGINS (${allowed.join(', ')}).`;
}
