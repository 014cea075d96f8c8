import { createHash, createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

/** Bytes of a random secret handed to a client: 256 bits. */
export const RANDOM_SECRET_BYTES = 32;

/**
 * 256 bits from the CSPRNG in unpadded base64url (43 characters): the value of a short-lived
 * cookie (a sign-in challenge, an identity provider flow) that the database knows only by its
 * SHA-256. Refresh tokens have a format of their own (src/crypto/refresh-token.ts).
 */
export function newRandomSecret(): string {
  return randomBytes(RANDOM_SECRET_BYTES).toString('base64url');
}

/** The base64url alphabet without padding (RFC 4648 §5, as JOSE uses it: RFC 7515 §2). */
const BASE64URL_TEXT = /^[A-Za-z0-9_-]*$/;

/**
 * The bytes that `text` encodes, if it is canonical unpadded base64url: only the alphabet, and
 * encoding the decoded bytes gives `text` back. Node's decoder is lenient (it skips foreign
 * characters and ignores the unused low bits of the last character), so without this check
 * several spellings decode to one value: `'A'.repeat(42) + 'B'` decodes to the same 32 bytes as
 * `'A'.repeat(43)`. Every token parser of the service accepts only the canonical spelling
 * (RFC 4648 §3.5: decoders MAY reject non-zero pad bits; here they must).
 * @returns the decoded bytes, or undefined for any other text (never throws).
 */
export function decodeCanonicalBase64url(text: string): Buffer | undefined {
  if (!BASE64URL_TEXT.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

/** SHA-256 of `value`, base64url. The at-rest form of refresh tokens (docs/api.md#refresh-token-format) and of other 256-bit secrets. */
export function sha256(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('base64url');
}

/** HMAC-SHA-256 of `value` under `key`, base64url. The at-rest form of verification codes. */
export function hmacSha256(key: Buffer, value: string): string {
  return createHmac('sha256', key).update(value, 'utf8').digest('base64url');
}

/** Digits of a verification code (docs/api.md#rules: exactly 6). */
export const VERIFICATION_CODE_DIGITS = 6;

/** A 6-digit verification code, uniformly drawn from the CSPRNG (docs/api.md#verification-codes). */
export function newVerificationCode(): string {
  return randomInt(0, 10 ** VERIFICATION_CODE_DIGITS).toString().padStart(VERIFICATION_CODE_DIGITS, '0');
}

/** Compares two strings in time independent of where they differ (STYLE habit 4). */
export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}
