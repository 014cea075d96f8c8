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

/**
 * vitest.config.ts runs a worker's files in one module graph (`isolate: false`): a file that
 * mocked a module, stubbed a global, faked timers or set an environment variable would change
 * what the files after it in that worker see.
 */
const LEAKS_ACROSS_FILES = [
  /\bvi\.(mock|doMock|stubGlobal|stubEnv|useFakeTimers|spyOn)\(/,
  /process\.env(\[[^\]]+\]|\.[A-Za-z_]\w*)\s*=[^=]/,
  /delete process\.env\b/,
  /Object\.assign\(process\.env\b/,
  /globalThis\.\w+\s*=[^=]/,
];

describe('files that share a worker (vitest.config.ts, isolate: false)', () => {
  it('none mocks a module, stubs a global, fakes timers or sets an environment variable', () => {
    const files = testFilesUnder('test').filter((f) => !f.startsWith('test/reliability/') && f !== 'test/unit/test-projects.test.ts');
    expect(files.length).toBeGreaterThan(50);
    for (const f of files) {
      const text = readFileSync(path.join(ROOT, f), 'utf8');
      for (const pattern of LEAKS_ACROSS_FILES) expect(pattern.test(text), `${f} matches ${pattern}: it would leak into the next file of its worker`).toBe(false);
    }
  });

  it('the check sees what it looks for', () => {
    const samples = ["vi.mock('../x.js')", 'vi.useFakeTimers()', "process.env.PORT = '1'", "process.env['PORT'] = '1'", 'delete process.env.PORT', 'Object.assign(process.env, {})', 'globalThis.fetch = f'];
    for (const s of samples) expect(LEAKS_ACROSS_FILES.some((p) => p.test(s)), s).toBe(true);
    expect(LEAKS_ACROSS_FILES.some((p) => p.test("process.env.PORT === '1'"))).toBe(false);
  });
});
