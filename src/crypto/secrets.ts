import { createHash, createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

/** Refresh token entropy: 32 bytes = 256 bits (decisions.md §4). */
export const REFRESH_TOKEN_BYTES = 32;

/** An opaque random refresh token: 256 bits from the CSPRNG, base64url (43 characters). */
export function newRefreshToken(): string {
  return randomBytes(REFRESH_TOKEN_BYTES).toString('base64url');
}

/** SHA-256 of `value`, base64url. The at-rest form of refresh tokens (decisions.md §4). */
export function sha256(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('base64url');
}

/** HMAC-SHA-256 of `value` under `key`, base64url. The at-rest form of verification codes. */
export function hmacSha256(key: Buffer, value: string): string {
  return createHmac('sha256', key).update(value, 'utf8').digest('base64url');
}

/** Digits of a verification code (spec §8: exactly 6). */
export const VERIFICATION_CODE_DIGITS = 6;

/** A 6-digit verification code, uniformly drawn from the CSPRNG (decisions.md §6). */
export function newVerificationCode(): string {
  return randomInt(0, 10 ** VERIFICATION_CODE_DIGITS).toString().padStart(VERIFICATION_CODE_DIGITS, '0');
}

/** Compares two strings in time independent of where they differ (STYLE habit 4). */
export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}
