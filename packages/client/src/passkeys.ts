/**
 * The browser half of the WebAuthn ceremonies (W3C WebAuthn Level 3 §5.1.3 create, §5.1.4 get)
 * through @simplewebauthn/browser: the service's options JSON in, the credential's response JSON
 * out. index.ts imports this module with import() on the first passkey operation, so that an
 * app's bundler puts it and @simplewebauthn/browser in a chunk of their own, loaded only then.
 */
import { startAuthentication, startRegistration } from '@simplewebauthn/browser';
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/browser';
import { LatchkeyError } from './errors.js';

/**
 * The LatchkeyError of a ceremony the browser did not complete (status 0; nothing is sent after it):
 * - `client.passkey_cancelled`: `NotAllowedError` (the user dismissed the prompt, it timed out,
 *   or no authenticator holds a passkey for this site: WebAuthn Level 3 reports all of these
 *   alike, for privacy), or `AbortError` (another ceremony of the page replaced this one);
 * - `client.passkey_exists`: `InvalidStateError` on registration: the authenticator already holds
 *   a passkey of this account (one of the options' `excludeCredentials`);
 * - `client.passkey_failed`: anything else, the browser's message kept and its error as `cause`.
 */
function ceremonyError(err: unknown): LatchkeyError {
  // @simplewebauthn/browser's WebAuthnError takes the name of the browser's DOMException.
  const name = (err as { name?: unknown } | null)?.name;
  const message = err instanceof Error ? err.message : String(err);
  if (name === 'NotAllowedError' || name === 'AbortError') return new LatchkeyError('client.passkey_cancelled', 'The passkey prompt was cancelled, timed out, or found no passkey for this site.', 0, null, { cause: err });
  if (name === 'InvalidStateError') return new LatchkeyError('client.passkey_exists', 'This authenticator already holds a passkey for this account.', 0, null, { cause: err });
  return new LatchkeyError('client.passkey_failed', message, 0, null, { cause: err });
}

/** Creates a credential (registration) for the service's creation options; rejects with a LatchkeyError (ceremonyError). */
export async function createCredential(optionsJSON: PublicKeyCredentialCreationOptionsJSON): Promise<unknown> {
  try {
    return await startRegistration({ optionsJSON });
  } catch (err) {
    throw ceremonyError(err);
  }
}

/** Gets an assertion (authentication) for the service's request options; rejects with a LatchkeyError (ceremonyError). */
export async function getAssertion(optionsJSON: PublicKeyCredentialRequestOptionsJSON): Promise<unknown> {
  try {
    return await startAuthentication({ optionsJSON });
  } catch (err) {
    throw ceremonyError(err);
  }
}
