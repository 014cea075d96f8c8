import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { inject } from 'vitest';
import pg from 'pg';
import type { Db } from '../../src/db/db.js';
import { migrate } from '../../src/db/migrate.js';
import { openPostgres } from '../../src/db/pg.js';
import { openPglite, type PgliteDb } from '../../src/db/pglite.js';

/** A migrated, empty database for one test file, and how to throw it away. */
export interface TestDatabase {
  readonly db: Db;
  /** Connection URL (PostgreSQL only), for tests that need a second pool or instance. */
  readonly url: string | undefined;
  drop(): Promise<void>;
}

/**
 * The pool mode of the test connections: TEST_DATABASE_POOL_MODE, `transaction` when
 * TEST_DATABASE_URL names PgBouncer in transaction mode (`.ci/run` runs the PostgreSQL project
 * that way too); `session` otherwise.
 */
export function testPoolMode(): 'session' | 'transaction' {
  return process.env.TEST_DATABASE_POOL_MODE === 'transaction' ? 'transaction' : 'session';
}

let dump: Promise<Blob | undefined> | undefined;

/**
 * The migrated PGlite dump test/global-setup.ts wrote for this run, read once per worker;
 * undefined outside a vitest run with that setup (the database then starts empty).
 */
function migratedDump(): Promise<Blob | undefined> {
  dump ??= (async () => {
    let file: string | undefined;
    try {
      file = inject('pgliteDump');
    } catch {
      return undefined;
    }
    return file === undefined ? undefined : new Blob([await readFile(file)]);
  })();
  return dump;
}

/**
 * This worker's PGlite databases that no file holds, each with the statement that empties it.
 * vitest.config.ts runs a worker's files one after the other in one module graph (`isolate:
 * false`), so a database a file dropped is emptied and handed to the next file instead of
 * starting another PGlite (about 1.5 s of CPU each, and memory that a worker would otherwise
 * collect only late).
 */
const idlePglite: PgliteDb[] = [];

/**
 * The statement that empties every table but the migrations' own (`schema_version`), and restarts
 * their sequences: the migrations insert no row, so an emptied database is what a fresh one is.
 * Read once per worker from its first database: every copy of the dump has the same tables.
 */
let emptying: Promise<string> | undefined;
function emptyingStatement(db: PgliteDb): Promise<string> {
  emptying ??= db
    .query<{ tables: string }>(
      `SELECT string_agg(format('%I.%I', schemaname, tablename), ', ' ORDER BY tablename) AS tables
         FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_version'`,
    )
    .then(({ rows }) => `TRUNCATE ${rows[0]!.tables} RESTART IDENTITY CASCADE`);
  return emptying;
}

/**
 * How long a test may take that starts PGlite without the migrated dump (its own initdb, then
 * every migration), in memory or in a DATA_DIR: about 10 s alone, beyond the suite's 20 s when
 * the machine is busy.
 */
export const PGLITE_FROM_EMPTY_TIMEOUT_MS = 90_000;

/** A migrated, empty PGlite database: an idle one of this worker emptied, or a new copy of the dump. */
async function pgliteTestDatabase(): Promise<TestDatabase> {
  let db = idlePglite.pop();
  if (db !== undefined) {
    try {
      await db.exec(await emptyingStatement(db));
    } catch {
      // Closed by the file that had it: start a new one.
      db = undefined;
    }
  }
  if (db === undefined) {
    db = await openPglite(undefined, { loadDataDir: await migratedDump() });
    await migrate(db);
  }
  const held = db;
  let dropped = false;
  return {
    db: held,
    url: undefined,
    async drop() {
      if (dropped) return;
      dropped = true;
      idlePglite.push(held);
    },
  };
}

/**
 * Creates a fresh database: an empty, migrated in-memory PGlite when TEST_DB is unset or
 * `pglite` (one this worker's earlier files dropped, emptied, or a new one); a new database on
 * the TEST_DATABASE_URL server when TEST_DB is `postgres` (dropped afterwards).
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  if (process.env.TEST_DB !== 'postgres') return pgliteTestDatabase();
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (adminUrl === undefined) throw new Error('TEST_DB=postgres needs TEST_DATABASE_URL');
  const name = `auth_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = openPostgres({ url: url.toString(), poolMax: 10, poolMode: testPoolMode() });
  await migrate(db);
  return {
    db,
    url: url.toString(),
    async drop() {
      await db.close();
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
