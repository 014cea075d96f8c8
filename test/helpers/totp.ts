import { createHmac } from 'node:crypto';

/**
 * The test suite's own RFC 6238 TOTP (SHA-1, 6 digits, 30 s), independent of the service's
 * otplib, so a test computes the code an authenticator app would show.
 */
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 decoding (upper or lower case, padding ignored). */
export function base32Decode(text: string): Buffer {
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const ch of text.toUpperCase().replace(/=+$/, '')) {
    const index = BASE32.indexOf(ch);
    if (index === -1) throw new Error(`not base32: ${ch}`);
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** The TOTP code of `secret` (base32) for time step `step` (RFC 4226 §5.3 dynamic truncation). */
export function totpForStep(secret: string, step: number): string {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = createHmac('sha1', base32Decode(secret)).update(counter).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  const binary = ((mac[offset]! & 0x7f) << 24) | (mac[offset + 1]! << 16) | (mac[offset + 2]! << 8) | mac[offset + 3]!;
  return String(binary % 1_000_000).padStart(6, '0');
}

/** The time step of a moment (RFC 6238 §4: floor(unix seconds / 30)). */
export function stepAt(now: Date): number {
  return Math.floor(now.getTime() / 1000 / 30);
}
