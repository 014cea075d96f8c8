import { describe, expect, it } from 'vitest';
import { ERROR_CATALOG, type ErrorCode } from '../../src/errors.js';
import { tooManyAttempts, type TooManyAttemptsCode } from '../../src/modules/rate-limits/rate-limits.service.js';

describe('tooManyAttempts: the 429 of every rate limit (docs/api.md#rate-limits)', () => {
  it('answers the code with status 429 and Retry-After in whole seconds', () => {
    const err = tooManyAttempts('auth.sign_up.too_many_attempts', 42);
    expect(err.code).toBe('auth.sign_up.too_many_attempts');
    expect(err.status).toBe(429);
    expect(err.headers).toEqual({ 'retry-after': '42' });
  });

  it('rounds a fraction up and never answers less than 1 second', () => {
    expect(tooManyAttempts('auth.mfa.too_many_attempts', 2.1).headers['retry-after']).toBe('3');
    expect(tooManyAttempts('auth.mfa.too_many_attempts', 0.2).headers['retry-after']).toBe('1');
    expect(tooManyAttempts('auth.mfa.too_many_attempts', 0).headers['retry-after']).toBe('1');
    expect(tooManyAttempts('auth.mfa.too_many_attempts', -5).headers['retry-after']).toBe('1');
    expect(tooManyAttempts('auth.mfa.too_many_attempts', Number.NaN).headers['retry-after']).toBe('1');
  });

  it('accepts every 429 code of the catalog', () => {
    const codes = (Object.keys(ERROR_CATALOG) as ErrorCode[]).filter((c) => ERROR_CATALOG[c].status === 429) as TooManyAttemptsCode[];
    expect(codes.length).toBeGreaterThan(0);
    for (const code of codes) {
      const err = tooManyAttempts(code, 7);
      expect(err.status, code).toBe(429);
      expect(err.headers['retry-after'], code).toMatch(/^[1-9][0-9]*$/);
    }
  });
});
