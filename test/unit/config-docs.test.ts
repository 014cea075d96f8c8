/**
 * README.md's "Configuration" table is generated from the declaration of every setting
 * (src/settings.ts) by `npm run config-docs`; this test fails while the two differ.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { RETIRED_SETTINGS, SETTINGS, TABLE_END, TABLE_START, renderConfigurationTable, withConfigurationTable } from '../../src/settings.js';

const README = path.resolve(import.meta.dirname, '../../README.md');

describe('README "Configuration" (generated from src/settings.ts)', () => {
  it('README.md holds the table the declaration gives', () => {
    const readme = readFileSync(README, 'utf8');
    expect(readme, 'README.md\'s configuration table differs from src/settings.ts: run `npm run config-docs` and commit README.md').toBe(withConfigurationTable(readme));
  });

  it('the table has one row per declared setting, between the markers, each with a default and a meaning', () => {
    const rows = renderConfigurationTable().split('\n').slice(2);
    expect(rows).toHaveLength(Object.keys(SETTINGS).length);
    for (const row of rows) expect(row).toMatch(/^\| `[A-Z0-9_<>]+` \| [^|]+ \| .+ \|$/);
    const readme = readFileSync(README, 'utf8');
    expect(readme.indexOf(TABLE_START)).toBeLessThan(readme.indexOf(TABLE_END));
  });

  it('fills in bounds and allowed values from the declaration', () => {
    const table = renderConfigurationTable();
    expect(table).toContain('| `ACCESS_TOKEN_TTL_SECONDS` | `900` | access token lifetime (30 to 86400) |');
    expect(table).toContain('`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`');
    expect(table).not.toMatch(/\{(range|max|values)\}/);
  });

  it('every int setting is refused outside its declared bounds, with the bounds in the message', () => {
    for (const [name, setting] of Object.entries(SETTINGS)) {
      if (setting.kind !== 'int') continue;
      expect(() => loadConfig({ [name]: String(setting.max + 1) }), name).toThrow(`${name}: expected an integer from ${setting.min} to ${setting.max}, got "${setting.max + 1}"`);
    }
  });

  it('a retired setting is refused, with what replaced it', () => {
    for (const [name, replacement] of Object.entries(RETIRED_SETTINGS)) {
      let error: unknown;
      try {
        loadConfig({ [name]: '5' });
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems).toEqual([`${name}: no longer supported; ${replacement}`]);
    }
  });
});
