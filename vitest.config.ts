import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Three projects (README, "Tests"):
 * - `pglite`: every suite but the browser files, on the embedded PGlite database;
 * - `postgres` (only with TEST_DATABASE_URL set): the same suites again against that PostgreSQL
 *   server, without the files that open no database (DATABASE_FREE_TESTS);
 * - `browser`: the files that drive Chromium or wait for real token expiry (BROWSER_TESTS), once,
 *   on PGlite: they test the pages and the browser client, which do not depend on the database.
 * `npm test` runs them all, each in a vitest process of its own (scripts/test.mjs);
 * `npx vitest run --project browser` runs one.
 */
/**
 * TEST_EXCLUDE: more file globs to leave out, comma-separated, in every project (`.ci/run` uses it
 * for the parts of a project its second runs leave out; vitest's --exclude does not reach the
 * projects' own lists).
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
/**
 * The browser project: the pages in Chromium (test/e2e/**, with the token-verifying example
 * beside them), @latchkey/client in Chromium, and the client tabs, which wait for real token
 * expiry (minutes). test/unit/test-projects.test.ts checks that every file launching Chromium
 * is listed here.
 */
export const BROWSER_TESTS = [
  'test/e2e/**',
  'test/clients/client-tabs.test.ts',
  'test/clients/client-operations.test.ts',
  'test/clients/oauth-browser.test.ts',
  'test/clients/standalone-client.test.ts',
  'test/clients/examples.test.ts',
];

interface Project {
  extends: true;
  test: { name: string; env: Record<string, string>; include: string[]; exclude: string[]; expect?: { poll: { timeout: number } } };
}
/**
 * How long `expect.poll` waits in the browser project: as long as the pages' own waits (vitest's
 * default of 1 s is shorter than a page update takes on a busy 2-core machine).
 */
const BROWSER_POLL_TIMEOUT_MS = 15_000;
/** Every test file; each project sets its own (a project's list is added to the root's, not put in its place). */
const ALL = ['test/**/*.test.ts'];
const projects: Project[] = [
  { extends: true, test: { name: 'pglite', env: { TEST_DB: 'pglite' }, include: ALL, exclude: [...EXCLUDE, ...BROWSER_TESTS] } },
  { extends: true, test: { name: 'browser', env: { TEST_DB: 'pglite' }, include: BROWSER_TESTS, exclude: EXCLUDE, expect: { poll: { timeout: BROWSER_POLL_TIMEOUT_MS } } } },
];
if (process.env.TEST_DATABASE_URL) {
  projects.push({ extends: true, test: { name: 'postgres', env: { TEST_DB: 'postgres' }, include: ALL, exclude: [...EXCLUDE, ...DATABASE_FREE_TESTS, ...BROWSER_TESTS] } });
}

export default defineConfig({
  test: {
    // No include here: each project has its own. The reliability suite (faults, crashes, several
    // instances) is slower and left out of every project: `npm run test:reliability`.
    // One migrated PGlite dump per run: each file's database starts from it (test/helpers/database.ts).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // A worker runs its files one after the other in one module graph: the service's modules
    // (Fastify, TypeBox, jose, the routes) are imported once per worker instead of once per file,
    // about 3 s of CPU a file. Nothing in the suite keeps state at module level that another file
    // could see: each file builds its own app, database, clock and SMTP server, and no file mocks a
    // module, stubs a global or sets an environment variable (test/unit/test-projects.test.ts).
    // vitest then runs the projects of one invocation one after the other, so `npm test` starts
    // one invocation per project, side by side (scripts/test.mjs).
    isolate: false,
    // Two files at a time per project (vitest's default is one fewer than the cores: one on a
    // 2-core machine). Timing comparisons in the suite take medians of interleaved pairs, so a
    // neighbour's load falls on both sides alike.
    maxWorkers: 2,
    minWorkers: 1,
    projects,
  },
});
