import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BROWSER_TESTS, DATABASE_FREE_TESTS } from '../../vitest.config.js';

/**
 * The browser project (vitest.config.ts, BROWSER_TESTS) holds every test file that launches
 * Chromium: one left out would run in the pglite project and again against PostgreSQL, where
 * it would repeat what the browser project tests once.
 */
const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** What a test file that drives Chromium imports. */
const LAUNCHES_CHROMIUM = /from ['"]playwright-core['"]/;

/** The test files under `dir` (relative to the repository), recursively. */
function testFilesUnder(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return testFilesUnder(relative);
    return entry.name.endsWith('.test.ts') ? [relative] : [];
  });
}

/** Whether `file` is one of `patterns` (a file's path, or `dir/**` for everything below dir). */
function listed(patterns: readonly string[], file: string): boolean {
  return patterns.some((p) => (p.endsWith('/**') ? file.startsWith(p.slice(0, -2)) : file === p));
}

describe('the browser project (vitest.config.ts)', () => {
  const files = testFilesUnder('test').filter((f) => !f.startsWith('test/reliability/'));

  it('lists existing files', () => {
    for (const pattern of BROWSER_TESTS) expect(files.some((f) => listed([pattern], f)), pattern).toBe(true);
  });

  it('holds every test file that launches Chromium, and none of the database-free files', () => {
    const launching = files.filter((f) => LAUNCHES_CHROMIUM.test(readFileSync(path.join(ROOT, f), 'utf8')));
    expect(launching.length).toBeGreaterThan(5);
    for (const f of launching) expect(listed(BROWSER_TESTS, f), `${f} launches Chromium: add it to BROWSER_TESTS`).toBe(true);
    for (const f of files) if (listed(BROWSER_TESTS, f)) expect(listed(DATABASE_FREE_TESTS, f), f).toBe(false);
  });
});
