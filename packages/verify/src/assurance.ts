/**
 * Authenticator assurance from a token's `amr` (RFC 8176): did the session's sign-in use two
 * factors? NIST SP 800-63B-4 §2.2: AAL2 needs either two authenticators of different factors
 * (something you know, have or are) or one multi-factor authenticator, such as a passkey whose
 * authenticator verified the user with a PIN or a biometric (§3.1.7).
 */

/** The answer of {@link assuranceLevel}: AAL1 (one factor, or unknown) or AAL2 (two factors). */
export type AssuranceLevel = 'aal1' | 'aal2';

/** The RFC 8176 §2 methods that are a factor on their own, by kind. */
const FACTOR_OF: Readonly<Record<string, 'know' | 'have' | 'are'>> = {
  // Something you know.
  pwd: 'know',
  pin: 'know',
  // Something you have: a one-time code, a hardware- or software-secured key, a code sent to a phone.
  otp: 'have',
  hwk: 'have',
  swk: 'have',
  sms: 'have',
  tel: 'have',
  // Something you are.
  fpt: 'are',
  face: 'are',
  iris: 'are',
  retina: 'are',
  vbm: 'are',
};
/** Keys that `user` (the authenticator checked the user: Latchkey's passkeys) turns into a multi-factor authenticator. */
const KEYS = new Set(['hwk', 'swk']);
/** RFC 8176's own "multiple-factor authentication". */
const MFA = 'mfa';

/**
 * Whether the session behind an access token signed in with two factors, from its `amr` claim
 * (RFC 8176). Latchkey issues `["pwd"]` for a password (`aal1`), `["pwd","otp"]` for a password
 * and a TOTP or recovery code (`aal2`), and `["hwk","user"]` for a passkey the authenticator
 * unlocked by verifying the user (`aal2`: a multi-factor cryptographic authenticator, NIST SP
 * 800-63B-4 §3.1.7); docs/api.md#access-token. Other lists are read by RFC 8176's meanings: `mfa`,
 * or methods of two different factor kinds, or `user` beside a key, are `aal2`.
 *
 * Fails closed: a token with no `amr` (issued before the claim existed), an empty or malformed
 * one, or a single factor is `aal1`. It never answers `aal3`: `amr` does not show whether the
 * authenticator resists phishing and is hardware-bound as AAL3 requires.
 *
 * @param token a `VerifiedToken` from `verify`, its `claims`, or anything with an `amr` member.
 * @returns `'aal2'` for two factors, otherwise `'aal1'`; never throws.
 */
export function assuranceLevel(token: { readonly amr?: unknown }): AssuranceLevel {
  const amr = token?.amr;
  if (!Array.isArray(amr) || !amr.every((m): m is string => typeof m === 'string')) return 'aal1';
  if (amr.includes(MFA)) return 'aal2';
  const kinds = new Set(amr.map((m) => FACTOR_OF[m]).filter((kind) => kind !== undefined));
  if (kinds.size >= 2) return 'aal2';
  if (amr.includes('user') && amr.some((m) => KEYS.has(m))) return 'aal2';
  return 'aal1';
}
