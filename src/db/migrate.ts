import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Postgrator from 'postgrator';
import type { Db } from './db.js';

/** Postgrator's version table. */
const SCHEMA_TABLE = 'schema_version';
/** Key of the PostgreSQL advisory lock that serialises migrations across instances (docs/operations.md). */
const MIGRATION_LOCK_KEY = 7_243_001;

/**
 * The `migrations/` folder of this package, found by walking up from this file: `src/`,
 * `dist/src/`, or the bundle in `dist/service/`.
 */
export function migrationsDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'migrations'))) {
      return path.join(dir, 'migrations');
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('migrations folder not found');
    dir = parent;
  }
}

/** Where the schema stands: the applied version and the newest version shipped with the code. */
export interface SchemaStatus {
  readonly current: number;
  readonly latest: number;
}

function postgrator(conn: { query: Db['query']; exec: Db['exec'] }): Postgrator {
  return new Postgrator({
    migrationPattern: path.join(migrationsDir(), '*.do.*.sql').replaceAll('\\', '/'),
    driver: 'pg',
    schemaTable: SCHEMA_TABLE,
    execQuery: (sql) => conn.query(sql),
    execSqlScript: (sql) => conn.exec(sql),
  });
}

/**
 * Applies every pending forward-only migration from `migrations/` in one transaction, holding
 * a transaction-scoped PostgreSQL advisory lock (`pg_advisory_xact_lock`) so that several
 * instances starting at once migrate one after the other, directly or behind a pooler in
 * transaction mode (a session-level lock would be granted to any client of the pooler's server
 * session). Migrations must therefore be transactional (no `CREATE INDEX CONCURRENTLY`). The
 * transaction has no statement timeout (`SET LOCAL`, which ends with it).
 *
 * @returns the versions applied by this call (empty when the schema was current).
 * @throws the failing migration's database error; nothing of this call stays applied.
 */
export async function migrate(db: Db): Promise<number[]> {
  return db.withConnection(async (conn) => {
    // All pending migrations and postgrator's version rows commit together or not at all
    // (PostgreSQL DDL is transactional), so a crash never leaves a script applied but unrecorded.
    await conn.exec('BEGIN');
    try {
      await conn.exec('SET LOCAL statement_timeout = 0');
      await conn.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const applied = await postgrator(conn).migrate();
      await conn.exec('COMMIT');
      return applied.map((m) => m.version);
    } catch (err) {
      await conn.exec('ROLLBACK');
      throw err;
    }
  });
}

/** Reads the applied and latest schema versions without changing anything. */
export async function schemaStatus(db: Db): Promise<SchemaStatus> {
  return db.withConnection(async (conn) => {
    const p = postgrator(conn);
    const [current, latest] = await Promise.all([p.getDatabaseVersion(), p.getMaxVersion()]);
    return { current, latest };
  });
}

/** Thrown when the schema is behind the code and migrating at start is disabled. */
export class SchemaBehindError extends Error {
  constructor(readonly status: SchemaStatus) {
    super(
      `Database schema is at version ${status.current} but this version of the service needs ${status.latest}; ` +
        'run "npm run migrate" (or "latchkey migrate") first, or unset MIGRATE_ON_START=false.',
    );
    this.name = 'SchemaBehindError';
  }
}

/** What {@link prepareSchema} did, for the start's log: the versions it applied (often none) and where the schema stands. */
export interface PreparedSchema extends SchemaStatus {
  readonly applied: readonly number[];
}

/**
 * Brings the schema to what the code needs before the service starts (docs/operations.md, docs/operations.md
 * rule 3): migrates when `migrateOnStart`, else only checks.
 * @returns the versions applied by this call and the schema's version afterwards.
 * @throws {SchemaBehindError} when the schema is behind and `migrateOnStart` is false.
 */
export async function prepareSchema(db: Db, options: { migrateOnStart: boolean }): Promise<PreparedSchema> {
  const applied = options.migrateOnStart ? await migrate(db) : [];
  const status = await schemaStatus(db);
  if (status.current < status.latest) throw new SchemaBehindError(status);
  return { ...status, applied };
}
