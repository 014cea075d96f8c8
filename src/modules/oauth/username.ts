import { randomInt } from 'node:crypto';
import { USERNAME_MAX_LENGTH, USERNAME_MIN_LENGTH } from '../users/identifiers.js';

/** Digits appended (after `_`) to a derived username that is taken. */
export const USERNAME_SUFFIX_DIGITS = 4;

/** `count` random decimal digits. */
function randomDigits(count: number): string {
  let out = '';
  for (let i = 0; i < count; i++) out += String(randomInt(0, 10));
  return out;
}

/**
 * The username a provider's sign-up starts from (docs/api.md#sign-in-mode): `source` (the
 * provider's `preferred_username`, GitHub's `login`, else the email's local part) lowercased,
 * every character other than `[a-z0-9_]` replaced by `_`, cut to 32 characters, padded to 3
 * with random digits.
 */
export function derivedUsername(source: string): string {
  const chars = Array.from(source.toLowerCase()).map((c) => (/^[a-z0-9_]$/.test(c) ? c : '_'));
  const cut = chars.slice(0, USERNAME_MAX_LENGTH).join('');
  return cut.length >= USERNAME_MIN_LENGTH ? cut : cut + randomDigits(USERNAME_MIN_LENGTH - cut.length);
}

/**
 * The next username to try when `base` is taken: `base` cut so that the result stays within 32
 * characters, then `_` and {@link USERNAME_SUFFIX_DIGITS} random digits.
 */
export function usernameWithSuffix(base: string): string {
  return `${base.slice(0, USERNAME_MAX_LENGTH - USERNAME_SUFFIX_DIGITS - 1)}_${randomDigits(USERNAME_SUFFIX_DIGITS)}`;
}
