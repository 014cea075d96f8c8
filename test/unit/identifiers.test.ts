import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { normalizePassword } from '../../src/crypto/password.js';
import { normalizeEmail, normalizePhone, normalizeUsername } from '../../src/modules/users/identifiers.js';

describe('identifier normalisation (docs/api.md#identifiers)', () => {
  it('lower-cases usernames and trims and lower-cases emails', () => {
    expect(normalizeUsername('Alice_01')).toBe('alice_01');
    expect(normalizeEmail('  Alice@Example.COM ')).toBe('alice@example.com');
  });

  it.each([
    ['+49 (170) 123-4567', '+491701234567'],
    // The international prefix 00 in place of +, or after it: the same number.
    ['0049 170 1234567', '+491701234567'],
    ['0015551234567', '+15551234567'],
    ['+00 1 555 123 4567', '+15551234567'],
    ['12345678', '+12345678'],
  ])('normalises phone %s to %s', (input, expected) => {
    expect(normalizePhone(input)).toBe(expected);
  });

  it.each(['1234567', '+1234567890123456', '+12-34-56', '++12345678'])('rejects phone %s', (input) => {
    expect(normalizePhone(input)).toBeUndefined();
  });

  it('a normalised phone always matches the stored form', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[+]?[0-9 ()-]{8,24}$/), (input) => {
        const out = normalizePhone(input);
        if (out !== undefined) expect(out).toMatch(/^[+][0-9]{8,15}$/);
      }),
    );
  });
});

describe('password normalisation (docs/api.md#identifiers)', () => {
  it('NFKC-normalises and never trims', () => {
    expect(normalizePassword('ﬁﬁﬁﬁﬁﬁﬁﬁ')).toBe('fifififififififi');
    expect(normalizePassword('  spaced  ')).toBe('  spaced  ');
  });

  it('counts code points, not UTF-16 units or bytes', () => {
    expect(normalizePassword('😀'.repeat(72))).toBeDefined();
    expect(normalizePassword('😀'.repeat(73))).toBeUndefined();
    expect(normalizePassword('😀'.repeat(7))).toBeUndefined();
    expect(normalizePassword('é'.repeat(8))).toBeDefined();
  });
});
