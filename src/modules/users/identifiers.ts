/**
 * Normalisation of user identifiers (docs/api.md#identifiers). Pure functions; the same rules apply
 * at sign-up, sign-in, verification and resend, so a user is found however they typed it.
 */

/** Username length bounds (docs/api.md#operations). */
export const USERNAME_MIN_LENGTH = 3;
export const USERNAME_MAX_LENGTH = 32;
/** Longest email address accepted (docs/api.md#rules; RFC 3696 erratum 1690 gives 320 = 64 + 1 + 255). */
export const EMAIL_MAX_LENGTH = 320;

/** Lower-cases a username (the stored User pattern is `^[a-z0-9_]+$`). */
export function normalizeUsername(username: string): string {
  return username.toLowerCase();
}

/** Trims and lower-cases an email; uniqueness is therefore case-insensitive. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** Stored phone form (docs/api.md#rules). */
const STORED_PHONE = /^[+][0-9]{8,15}$/;

/**
 * The international call prefix written in place of `+` (ITU-T E.164 §6.2.1, used in most of the
 * world): `0015551234567` dials the same number as `+15551234567`. No country code starts with
 * 0, so a number that starts with it after `+` has no other reading.
 */
const INTERNATIONAL_PREFIX = '00';

/**
 * Removes spaces, `(`, `)` and `-`, then the international prefix `00` written in place of `+`
 * (or after it), and adds a missing leading `+`: `00 1 555 123 4567`, `+1 (555) 123-4567` and
 * `15551234567` are all `+15551234567`.
 * @returns the stored form `^[+][0-9]{8,15}$`, or undefined when the result does not match it.
 */
export function normalizePhone(phone: string): string | undefined {
  const stripped = phone.replace(/[\s()-]/g, '');
  const digits = stripped.startsWith('+') ? stripped.slice(1) : stripped;
  const withPlus = `+${digits.startsWith(INTERNATIONAL_PREFIX) ? digits.slice(INTERNATIONAL_PREFIX.length) : digits}`;
  return STORED_PHONE.test(withPlus) ? withPlus : undefined;
}
