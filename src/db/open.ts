import path from 'node:path';
import type { Config } from '../config.js';
import type { Db } from './db.js';
import { openPostgres } from './pg.js';

/** Folder of the embedded database inside DATA_DIR. */
export const PGLITE_SUBDIR = 'pglite';

/**
 * Opens the configured database: PostgreSQL when DATABASE_URL is set, else the embedded
 * PGlite database in `DATA_DIR/pglite` (decisions.md §1).
 */
export async function openDatabase(config: Pick<Config, 'databaseUrl' | 'databasePoolMax' | 'dataDir'>): Promise<Db> {
  if (config.databaseUrl !== undefined) return openPostgres({ url: config.databaseUrl, poolMax: config.databasePoolMax });
  // Loaded only when used: PGlite's module costs a PostgreSQL start about 25 ms and 5 MiB (docs/performance.md).
  const { openPglite } = await import('./pglite.js');
  return openPglite(path.join(config.dataDir, PGLITE_SUBDIR));
}
