import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { REFRESH_TOKEN_BYTES, REFRESH_TOKEN_SECRET_BYTES, refreshTokenBytes } from './refresh-token.js';
import { decodeCanonicalBase64url } from './secrets.js';

/**
 * Sealing of a refresh token's successor under a key that only the holder of the (parent)
 * token can derive, for the refresh grace window (docs/api.md#reuse-grace-window: "encrypted under a key
 * derived from the parent token, so the database alone never yields a usable token").
 *
 * Key: HKDF-SHA-256 (RFC 5869) over the parent token's secret (its 32 random bytes; the id
 * before them in a token of the current format is known to the database and adds nothing), empty
 * salt (the input is already 256 uniformly random bits, RFC 5869 §3.1), info
 * {@link SUCCESSOR_KEY_INFO}. Cipher: AES-256-GCM (NIST SP 800-38D) with a random 96-bit nonce
 * and a 128-bit tag. The database holds only the parent's id and SHA-256, which do not give this
 * key. The sealed plaintext is the successor's raw bytes: 48 for a token of the current format,
 * 32 for one of format 1 (sealed before the upgrade, opened within its window after it;
 * src/crypto/refresh-token.ts).
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
/** Lengths of a sealed successor: nonce, ciphertext of the token's raw bytes (48; a token of format 1 is its 32-byte secret alone), tag. */
const SEALED_BYTES_LENGTHS = new Set([REFRESH_TOKEN_BYTES, REFRESH_TOKEN_SECRET_BYTES].map((tokenBytes) => NONCE_BYTES + tokenBytes + TAG_BYTES));

function successorKey(parentSecret: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', parentSecret, Buffer.alloc(0), SUCCESSOR_KEY_INFO, KEY_BYTES));
}

/**
 * Encrypts `successorToken` under a key derived from `parentToken`.
 *
 * @param parentToken the refresh token being rotated (either format).
 * @param successorToken the token that replaces it (either format; the service makes the current one).
 * @returns base64url of `nonce (12 bytes) || ciphertext (the successor's 48 bytes) || tag (16 bytes)`:
 *   101 characters (80 for a successor of format 1).
 * @throws Error when either argument is not a refresh token (a programming error).
 */
export function sealSuccessor(parentToken: string, successorToken: string): string {
  const parent = refreshTokenBytes(parentToken);
  const successor = refreshTokenBytes(successorToken);
  if (parent === undefined || successor === undefined) throw new Error('sealSuccessor: not a refresh token');
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv(CIPHER, successorKey(parent.secret), nonce, { authTagLength: TAG_BYTES });
  const ciphertext = Buffer.concat([cipher.update(successor.bytes), cipher.final()]);
  return Buffer.concat([nonce, ciphertext, cipher.getAuthTag()]).toString('base64url');
}

/**
 * Decrypts a value made by {@link sealSuccessor}.
 *
 * @param parentToken the token presented by the client (the parent of the sealed successor).
 * @param sealed the stored base64url value.
 * @returns the successor token (64 base64url characters, or 43 for format 1), or undefined when
 *   `sealed` is malformed, `parentToken` is not the token it was sealed under (GCM tag mismatch),
 *   or the plaintext is not a refresh token. Never throws for bad input.
 */
export function openSuccessor(parentToken: string, sealed: string): string | undefined {
  const parent = refreshTokenBytes(parentToken);
  const raw = decodeCanonicalBase64url(sealed);
  if (parent === undefined || raw === undefined || !SEALED_BYTES_LENGTHS.has(raw.length)) return undefined;
  const nonce = raw.subarray(0, NONCE_BYTES);
  const ciphertext = raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES);
  const tag = raw.subarray(raw.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv(CIPHER, successorKey(parent.secret), nonce, { authTagLength: TAG_BYTES });
    decipher.setAuthTag(tag);
    const successor = Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('base64url');
    return refreshTokenBytes(successor) === undefined ? undefined : successor;
  } catch {
    // Authentication failed: wrong parent token or altered data.
    return undefined;
  }
}
