import { defineConfig } from 'vitest/config';

/**
 * The reliability suite (docs/reliability.md): faults caused for real (SMTP, database,
 * SIGTERM, SIGKILL, two instances). Slower than `npm test`, so it has its own script,
 * `npm run test:reliability`. Like vitest.config.ts, every file runs on PGlite and, with
 * TEST_DATABASE_URL set, again on that PostgreSQL server; the tests that need PostgreSQL skip
 * themselves on PGlite. The global setup builds `dist/` once for the tests that spawn the
 * real service, and writes the migrated PGlite dump every file's database starts from.
 */
const projects = [{ extends: true as const, test: { name: 'pglite', env: { TEST_DB: 'pglite' } } }];
if (process.env.TEST_DATABASE_URL) {
  projects.push({ extends: true as const, test: { name: 'postgres', env: { TEST_DB: 'postgres' } } });
}

export default defineConfig({
  test: {
    include: ['test/reliability/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts', 'test/reliability/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two cores: the spawned services and the load they take need the CPU more than parallel files.
    maxWorkers: 2,
    minWorkers: 1,
    projects,
  },
});
