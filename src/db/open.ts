import path from 'node:path';
import type { Config } from '../config.js';
import { lockDataDir } from './data-dir-lock.js';
import type { Db } from './db.js';
import { openPostgres } from './pg.js';

/** Folder of the embedded database inside DATA_DIR. */
export const PGLITE_SUBDIR = 'pglite';

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
 * @throws {DataDirLockedError} on PGlite when another live process holds DATA_DIR; PGlite's
 *   error when it cannot open the directory (the lock is released again).
 */
export async function openDatabase(config: Pick<Config, 'databaseUrl' | 'databasePoolMax' | 'dataDir'>, command = 'serve'): Promise<Db> {
  if (config.databaseUrl !== undefined) return openPostgres({ url: config.databaseUrl, poolMax: config.databasePoolMax });
  const lock = lockDataDir(config.dataDir, command);
  let db: Db;
  try {
    // Loaded only when used: PGlite's module costs a PostgreSQL start about 25 ms and 5 MiB (docs/performance.md).
    const { openPglite } = await import('./pglite.js');
    db = await openPglite(path.join(config.dataDir, PGLITE_SUBDIR));
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
