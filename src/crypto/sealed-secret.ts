import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** Version tag of the stored form; a new cipher or key scheme gets a new one. */
const VERSION = 'v1';
/** AES-GCM nonce length in bytes: 96 bits, the recommended size (NIST SP 800-38D §8.2). */
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Encrypts a secret the service must read back (a TOTP secret, a webhook signing secret) for
 * storage: AES-256-GCM under `key` (32 bytes) with a random 96-bit nonce and `owner` (the id of
 * the row it belongs to: a user, a webhook endpoint) as additional authenticated data, so a
 * ciphertext copied to another row does not decrypt (OWASP ASVS 5.0 V11.3.2: authenticated
 * encryption).
 * @returns `v1.<nonce>.<ciphertext>.<tag>`, each part base64url.
 */
export function sealSecret(key: Buffer, owner: string, secret: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(owner, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return [VERSION, iv.toString('base64url'), ciphertext.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
}

/**
 * Decrypts what {@link sealSecret} stored for `owner`.
 * @returns the secret, or undefined when the text is not ours or does not authenticate (another
 *   key, another owner, altered bytes).
 */
export function openSecret(key: Buffer, owner: string, sealed: string): string | undefined {
  const [version, iv, ciphertext, tag, ...rest] = sealed.split('.');
  if (version !== VERSION || iv === undefined || ciphertext === undefined || tag === undefined || rest.length > 0) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(owner, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}
