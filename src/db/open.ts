import path from 'node:path';
import type { Config } from '../config.js';
import type { Db } from './db.js';
import { openPostgres } from './pg.js';
import { openPglite } from './pglite.js';

/** Folder of the embedded database inside DATA_DIR. */
export const PGLITE_SUBDIR = 'pglite';

/**
 * Opens the configured database: PostgreSQL when DATABASE_URL is set, else the embedded
 * PGlite database in `DATA_DIR/pglite` (decisions.md §1).
 */
export async function openDatabase(config: Pick<Config, 'databaseUrl' | 'databasePoolMax' | 'dataDir'>): Promise<Db> {
  if (config.databaseUrl !== undefined) return openPostgres({ url: config.databaseUrl, poolMax: config.databasePoolMax });
  return openPglite(path.join(config.dataDir, PGLITE_SUBDIR));
}
