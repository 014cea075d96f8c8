import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ACCOUNT_RULE_NAMES, rateLimitRules } from '../../src/modules/rate-limits/rate-limits.rules.js';

describe('ACCOUNT_RULE_NAMES (the rate-limit rows account deletion deletes)', () => {
  it('names exactly the rules counted per account', () => {
    const names = Object.values(rateLimitRules(loadConfig({}).rateLimits))
      .filter((rule) => rule.subject === 'account')
      .map((rule) => rule.name)
      .sort();
    expect(names).toEqual([...ACCOUNT_RULE_NAMES].sort());
  });
});
