import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DATABASE_FREE_TESTS } from '../../vitest.config.js';

/**
 * The files the PostgreSQL project leaves out (vitest.config.ts, DATABASE_FREE_TESTS) must not
 * open a database: a test that did would then never run against PostgreSQL.
 */
const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** What a test that opens a database names: the test database helpers, the app or a pool. */
const OPENS_A_DATABASE = /createTestContext|createTestDatabase|helpers\/context|helpers\/database|buildApp|openPostgres|openPglite|TEST_DATABASE_URL|TEST_DB/;

function filesOf(pattern: string): string[] {
  if (!pattern.endsWith('/**')) return [pattern];
  const dir = pattern.slice(0, -3);
  return readdirSync(path.join(ROOT, dir)).filter((f) => f.endsWith('.ts')).map((f) => `${dir}/${f}`);
}

describe('database-free test files (run in the PGlite project only)', () => {
  const files = DATABASE_FREE_TESTS.flatMap(filesOf);

  it('lists existing files', () => {
    expect(files.length).toBeGreaterThan(DATABASE_FREE_TESTS.length);
    for (const f of files) expect(() => readFileSync(path.join(ROOT, f)), f).not.toThrow();
  });

  it.each(files.filter((f) => f !== 'test/unit/database-free.test.ts'))('%s opens no database', (f) => {
    expect(readFileSync(path.join(ROOT, f), 'utf8')).not.toMatch(OPENS_A_DATABASE);
  });
});
