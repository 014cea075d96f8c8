/**
 * The origin check of a WebAuthn ceremony, done before the library's verification so that a
 * response from a page whose origin is not configured is told so (W3C WebAuthn Level 3 §7.1
 * step 9, §7.2 step 13: the client data's `origin` must be one the relying party expects).
 * @simplewebauthn/server checks the same again; this only gives the refusal its reason.
 */

/** Longest origin repeated in a message, in characters: any real origin fits; a forged one is cut short. */
const MAX_SHOWN_ORIGIN_LENGTH = 100;

/** The `origin` member of a response's clientDataJSON (base64url JSON), or undefined when it cannot be read. */
function originOf(clientDataJson: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(clientDataJson, 'base64url').toString('utf8'));
    const origin = (parsed as { origin?: unknown } | null)?.origin;
    return typeof origin === 'string' ? origin : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why a ceremony's response is refused for its origin: a sentence naming the origin the
 * browser signed (as a JSON string, cut to {@link MAX_SHOWN_ORIGIN_LENGTH} characters) and the
 * allowed ones (WEBAUTHN_ORIGINS); undefined when the origin is allowed, or cannot be read (the
 * library then refuses the response for what it is).
 *
 * @param clientDataJson the response's `response.clientDataJSON`, base64url.
 * @param allowed the configured origins, exact (`https://app.example.com`).
 */
export function originRefusal(clientDataJson: string, allowed: readonly string[]): string | undefined {
  const origin = originOf(clientDataJson);
  if (origin === undefined || allowed.includes(origin)) return undefined;
  const chars = Array.from(origin);
  const shown = chars.length > MAX_SHOWN_ORIGIN_LENGTH ? `${chars.slice(0, MAX_SHOWN_ORIGIN_LENGTH).join('')}…` : origin;
  return `the browser signed the response on origin ${JSON.stringify(shown)}, which is not one of WEBAUTHN_ORIGINS (${allowed.join(', ')}).`;
}
