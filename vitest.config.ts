import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Every suite runs on the embedded PGlite database; with TEST_DATABASE_URL set, the same suites
 * run again as a second project against that PostgreSQL server (docs/operations.md).
 */
/**
 * TEST_EXCLUDE: more file globs to leave out, comma-separated (`.ci/run` uses it for its second
 * runs; vitest's --exclude does not reach the projects' own lists).
 */
const EXTRA_EXCLUDE = (process.env.TEST_EXCLUDE ?? '').split(',').map((g) => g.trim()).filter((g) => g !== '');
const EXCLUDE = [...configDefaults.exclude, 'test/reliability/**', ...EXTRA_EXCLUDE];
/**
 * Files that open no database (pure functions, documents, packaging): they run once, in the
 * PGlite project; the PostgreSQL project (run directly and again through PgBouncer in CI) would
 * only repeat them. test/unit/database-free.test.ts checks that none of them opens a database.
 */
export const DATABASE_FREE_TESTS = [
  'test/unit/**',
  'test/clients/package-install.test.ts',
  'test/clients/demo-client-bundle.test.ts',
  'test/clients/verify-webhook.test.ts',
];
const projects: Array<{ extends: true; test: { name: string; env: Record<string, string>; exclude?: string[] } }> = [
  { extends: true, test: { name: 'pglite', env: { TEST_DB: 'pglite' } } },
];
if (process.env.TEST_DATABASE_URL) {
  projects.push({ extends: true, test: { name: 'postgres', env: { TEST_DB: 'postgres' }, exclude: [...EXCLUDE, ...DATABASE_FREE_TESTS] } });
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The reliability suite (faults, crashes, several instances) is slower: `npm run test:reliability`.
    exclude: EXCLUDE,
    // One migrated PGlite dump per run: each file's database starts from it (test/helpers/database.ts).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at a time (vitest's default is one fewer than the cores: one on a 2-core CI
    // machine). Timing comparisons in the suite take medians of interleaved pairs, so a
    // neighbour's load falls on both sides alike.
    maxWorkers: 2,
    minWorkers: 1,
    projects,
  },
});
