import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Every suite runs on the embedded PGlite database; with TEST_DATABASE_URL set, the same suites
 * run again as a second project against that PostgreSQL server (docs/operations.md).
 */
const projects = [{ extends: true as const, test: { name: 'pglite', env: { TEST_DB: 'pglite' } } }];
if (process.env.TEST_DATABASE_URL) {
  projects.push({ extends: true as const, test: { name: 'postgres', env: { TEST_DB: 'postgres' } } });
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The reliability suite (faults, crashes, several instances) is slower: `npm run test:reliability`.
    exclude: [...configDefaults.exclude, 'test/reliability/**'],
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
