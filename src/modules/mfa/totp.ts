import { randomInt } from 'node:crypto';
import { generateSecret, verify } from 'otplib';
import { hmacSha256 } from '../../crypto/secrets.js';

/** The TOTP parameters (RFC 6238; the defaults every authenticator app supports): SHA-1, 6 digits, 30 s. */
export const TOTP_PERIOD_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** Bytes of a new secret: 160 bits, RFC 4226 §4's recommendation (32 base32 characters). */
export const TOTP_SECRET_BYTES = 20;
/** How many recovery codes a set holds. */
export const RECOVERY_CODE_COUNT = 10;
/** Characters of a recovery code (without its dash): 10 of 32 symbols, 50 bits. */
const RECOVERY_CODE_LENGTH = 10;
/** Lower-case RFC 4648 base32 alphabet: no 0, 1, 8 or 9 to confuse with letters. */
const RECOVERY_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** A new TOTP secret, base32 (RFC 4648), {@link TOTP_SECRET_BYTES} bytes from the CSPRNG. */
export function newTotpSecret(): string {
  return generateSecret({ length: TOTP_SECRET_BYTES });
}

/**
 * The `otpauth://totp/` URI an authenticator app reads from a QR code (Google Authenticator Key
 * URI Format): label `issuer:account`, and `secret`, `issuer`, `algorithm`, `digits`, `period`.
 */
export function otpauthUri(c: { issuer: string; account: string; secret: string }): string {
  const label = `${encodeURIComponent(c.issuer)}:${encodeURIComponent(c.account)}`;
  const query = new URLSearchParams({ secret: c.secret, issuer: c.issuer, algorithm: 'SHA1', digits: String(TOTP_DIGITS), period: String(TOTP_PERIOD_SECONDS) });
  return `otpauth://totp/${label}?${query.toString().replace(/\+/g, '%20')}`;
}

/**
 * The time step (RFC 6238 §4: floor(unix time / 30)) at which `code` is the TOTP of `secret`,
 * looking at the step of `nowSeconds` and one step either side (RFC 6238 §5.2 allows one step of
 * drift); undefined when it matches none. Compared in constant time by otplib.
 */
export async function matchTotp(secret: string, code: string, nowSeconds: number): Promise<number | undefined> {
  if (!/^[0-9]{6}$/.test(code)) return undefined;
  try {
    const result = await verify({ secret, token: code, epoch: nowSeconds, epochTolerance: TOTP_PERIOD_SECONDS, period: TOTP_PERIOD_SECONDS, digits: TOTP_DIGITS, algorithm: 'sha1' });
    return result.valid ? Math.floor(nowSeconds / TOTP_PERIOD_SECONDS) + result.delta : undefined;
  } catch {
    return undefined;
  }
}

/** A new set of {@link RECOVERY_CODE_COUNT} recovery codes, `xxxxx-xxxxx` of lower-case base32 from the CSPRNG (50 bits each). */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const chars = Array.from({ length: RECOVERY_CODE_LENGTH }, () => RECOVERY_ALPHABET[randomInt(RECOVERY_ALPHABET.length)]!).join('');
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
}

/**
 * The stored form of a recovery code of `userId`: HMAC-SHA-256 under the recovery-code key of
 * the code as typed, lower-cased, without dashes or spaces; undefined when it cannot be one.
 */
export function recoveryCodeHash(key: Buffer, userId: string, typed: string): string | undefined {
  const normalized = typed.toLowerCase().replace(/[\s-]/g, '');
  if (normalized.length !== RECOVERY_CODE_LENGTH || [...normalized].some((c) => !RECOVERY_ALPHABET.includes(c))) return undefined;
  return hmacSha256(key, `${userId}:${normalized}`);
}
