import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { decodeCanonicalBase64url, REFRESH_TOKEN_BYTES } from './secrets.js';

/**
 * Sealing of a refresh token's successor under a key that only the holder of the (parent)
 * token can derive, for the refresh grace window (docs/api.md#reuse-grace-window: "encrypted under a key
 * derived from the parent token, so the database alone never yields a usable token").
 *
 * Key: HKDF-SHA-256 (RFC 5869) over the 32 raw bytes of the parent token, empty salt (the input
 * is already 256 uniformly random bits, RFC 5869 §3.1), info {@link SUCCESSOR_KEY_INFO}.
 * Cipher: AES-256-GCM (NIST SP 800-38D) with a random 96-bit nonce and a 128-bit tag.
 * The database holds only the SHA-256 of the parent, which does not give this key.
 */

/**
 * HKDF `info`: separates this key from every other use of the token bytes; versioned with the
 * format. It keeps the project's first name: another label would make the seals of rotations
 * still in their grace window unreadable after an upgrade.
 */
const SUCCESSOR_KEY_INFO = 'auth-service refresh-token successor v1';
/** AES-256 key length in bytes. */
const KEY_BYTES = 32;
/** GCM nonce length in bytes: 96 bits, the length SP 800-38D §8.2 recommends. Each key seals one message. */
const NONCE_BYTES = 12;
/** GCM tag length in bytes: the full 128 bits (SP 800-38D §5.2.1.2). */
const TAG_BYTES = 16;
const CIPHER = 'aes-256-gcm';
/** Length of a sealed successor: nonce, ciphertext of the raw token bytes, tag. */
const SEALED_BYTES = NONCE_BYTES + REFRESH_TOKEN_BYTES + TAG_BYTES;

/** The raw bytes of a refresh token (43 base64url characters), or undefined if it is not one. */
function tokenBytes(token: string): Buffer | undefined {
  const bytes = decodeCanonicalBase64url(token);
  return bytes?.length === REFRESH_TOKEN_BYTES ? bytes : undefined;
}

function successorKey(parentBytes: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', parentBytes, Buffer.alloc(0), SUCCESSOR_KEY_INFO, KEY_BYTES));
}

/**
 * Encrypts `successorToken` under a key derived from `parentToken`.
 *
 * @param parentToken the refresh token being rotated (43 base64url characters, 32 bytes).
 * @param successorToken the token that replaces it (same shape).
 * @returns base64url of `nonce (12 bytes) || ciphertext (32 bytes) || tag (16 bytes)`: 80 characters.
 * @throws Error when either argument is not a refresh token of that shape (a programming error).
 */
export function sealSuccessor(parentToken: string, successorToken: string): string {
  const parent = tokenBytes(parentToken);
  const successor = tokenBytes(successorToken);
  if (parent === undefined || successor === undefined) throw new Error('sealSuccessor: not a refresh token');
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv(CIPHER, successorKey(parent), nonce, { authTagLength: TAG_BYTES });
  const ciphertext = Buffer.concat([cipher.update(successor), cipher.final()]);
  return Buffer.concat([nonce, ciphertext, cipher.getAuthTag()]).toString('base64url');
}

/**
 * Decrypts a value made by {@link sealSuccessor}.
 *
 * @param parentToken the token presented by the client (the parent of the sealed successor).
 * @param sealed the stored base64url value.
 * @returns the successor token (43 base64url characters), or undefined when `sealed` is
 *   malformed, `parentToken` is not the token it was sealed under (GCM tag mismatch), or the
 *   plaintext is not a refresh token. Never throws for bad input.
 */
export function openSuccessor(parentToken: string, sealed: string): string | undefined {
  const parent = tokenBytes(parentToken);
  const raw = decodeCanonicalBase64url(sealed);
  if (parent === undefined || raw?.length !== SEALED_BYTES) return undefined;
  const nonce = raw.subarray(0, NONCE_BYTES);
  const ciphertext = raw.subarray(NONCE_BYTES, SEALED_BYTES - TAG_BYTES);
  const tag = raw.subarray(SEALED_BYTES - TAG_BYTES);
  try {
    const decipher = createDecipheriv(CIPHER, successorKey(parent), nonce, { authTagLength: TAG_BYTES });
    decipher.setAuthTag(tag);
    const plain = Buffer.concat([decipher.update(ciphertext), decipher.final()]);
    return plain.length === REFRESH_TOKEN_BYTES ? plain.toString('base64url') : undefined;
  } catch {
    // Authentication failed: wrong parent token or altered data.
    return undefined;
  }
}
