import { existsSync } from 'node:fs';
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.js';
import { lockDataDir } from './data-dir-lock.js';
import type { Db } from './db.js';
import { openPostgres } from './pg.js';

/** Folder of the embedded database inside DATA_DIR. */
export const PGLITE_SUBDIR = 'pglite';
/** A file every initialised PostgreSQL data directory holds, PGlite's included: its absence means a first start. */
const PG_VERSION_FILE = 'PG_VERSION';

/**
 * Opens the configured database: PostgreSQL when DATABASE_URL is set, else the embedded
 * PGlite database in `DATA_DIR/pglite` (docs/operations.md).
 *
 * PGlite is one process's in-memory copy of its files: a second process on the same directory
 * would silently lose one side's writes. So the embedded database is opened only under the
 * exclusive lock of DATA_DIR (`lockDataDir`, docs/operations.md "One process per DATA_DIR"),
 * taken before PGlite loads and released when the returned database is closed (or the process
 * exits). PostgreSQL takes no such lock: any number of processes share it.
 *
 * @param command what this process runs (`serve`, `migrate`, `sessions revoke`, ...), shown
 *   to a process that finds DATA_DIR in use.
 * @param log told at info level, once DATA_DIR's lock is held, that the embedded database is
 *   being opened, or created (a first start: some seconds), and where. A process refused the
 *   lock logs nothing.
 * @throws {DataDirLockedError} on PGlite when another live process holds DATA_DIR; PGlite's
 *   error when it cannot open the directory (the lock is released again).
 */
export async function openDatabase(
  config: Pick<Config, 'databaseUrl' | 'databasePoolMax' | 'databasePoolMode' | 'dataDir'>,
  command = 'serve',
  log?: Pick<FastifyBaseLogger, 'info'>,
): Promise<Db> {
  if (config.databaseUrl !== undefined) return openPostgres({ url: config.databaseUrl, poolMax: config.databasePoolMax, poolMode: config.databasePoolMode });
  const lock = lockDataDir(config.dataDir, command);
  const dir = path.join(config.dataDir, PGLITE_SUBDIR);
  if (log !== undefined) {
    const fresh = !existsSync(path.join(dir, PG_VERSION_FILE));
    log.info({ database: 'pglite', dir }, fresh ? `creating the embedded PGlite database in ${dir} (first start: this takes some seconds)` : `opening the embedded PGlite database in ${dir}`);
  }
  let db: Db;
  try {
    // Loaded only when used: PGlite's module costs a PostgreSQL start about 25 ms and 5 MiB (docs/performance.md).
    const { openPglite } = await import('./pglite.js');
    db = await openPglite(dir);
  } catch (err) {
    lock.release();
    throw err;
  }
  return {
    ...db,
    async close(): Promise<void> {
      try {
        await db.close();
      } finally {
        lock.release();
      }
    },
  };
}
