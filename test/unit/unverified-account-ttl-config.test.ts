import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('UNVERIFIED_ACCOUNT_TTL_SECONDS (docs/api.md#unverified-accounts-expire)', () => {
  it('defaults to 604800 (7 days) and reads a value from 86400 to ten years', () => {
    expect(loadConfig({}).unverifiedAccountTtlSeconds).toBe(604_800);
    expect(loadConfig({ UNVERIFIED_ACCOUNT_TTL_SECONDS: '86400' }).unverifiedAccountTtlSeconds).toBe(86_400);
    expect(loadConfig({ UNVERIFIED_ACCOUNT_TTL_SECONDS: '315360000' }).unverifiedAccountTtlSeconds).toBe(315_360_000);
  });

  it.each(['0', '86399', '315360001', 'a week', '-1', '1.5'])('refuses %j', (value) => {
    expect(() => loadConfig({ UNVERIFIED_ACCOUNT_TTL_SECONDS: value })).toThrow(ConfigError);
    expect(() => loadConfig({ UNVERIFIED_ACCOUNT_TTL_SECONDS: value })).toThrow(/UNVERIFIED_ACCOUNT_TTL_SECONDS/);
  });
});
