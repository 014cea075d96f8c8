import { mkdirSync } from 'node:fs';
import type { PGlite } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult } from './db.js';

/** The embedded database, which can also write a dump of itself. */
export interface PgliteDb extends Db {
  /** A copy of the whole database cluster, for {@link openPglite}'s `loadDataDir`. */
  dumpDataDir(): Promise<Blob>;
}

/**
 * Opens the embedded PGlite database (PostgreSQL compiled to WebAssembly).
 *
 * @param dataDir directory holding the database files; undefined keeps it in memory (tests).
 * @param options.loadDataDir an in-memory database starts as a copy of this dump (PGlite's
 *   `dumpDataDir`, an uncompressed tarball) instead of an empty cluster: the test suite starts
 *   each file's database from one migrated dump, about 7 times faster than PGlite's `initdb`.
 * PGlite has a single connection: its `query` and `transaction` share one mutex, so
 * transactions are serialised and a statement outside a transaction never runs inside one.
 */
export async function openPglite(dataDir: string | undefined, options: { loadDataDir?: Blob } = {}): Promise<PgliteDb> {
  if (dataDir !== undefined) mkdirSync(dataDir, { recursive: true });
  // Imported here, not at the top: in the bundle (scripts/bundle.mjs) this module is inlined
  // into the one file, where a top-level import would load PGlite on every start.
  const { PGlite: PGliteDatabase } = await import('@electric-sql/pglite');
  const pglite = dataDir === undefined ? new PGliteDatabase({ ...(options.loadDataDir === undefined ? {} : { loadDataDir: options.loadDataDir }) }) : new PGliteDatabase(dataDir);
  await pglite.waitReady;
  const wrap = (q: Pick<PGlite, 'query'>): Queryable => ({
    async query<R>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
      const result = await q.query<R>(sql, params as unknown[]);
      return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
    },
  });
  const root = wrap(pglite);
  const exec = async (sql: string): Promise<void> => void (await pglite.exec(sql));
  return {
    kind: 'pglite',
    query: root.query,
    transaction: <T>(fn: (tx: Queryable) => Promise<T>): Promise<T> => pglite.transaction((tx) => fn(wrap(tx))),
    exec,
    dumpDataDir: async () => pglite.dumpDataDir('none'),
    withConnection: (fn) => fn({ query: root.query, exec }),
    async close(): Promise<void> {
      if (!pglite.closed) await pglite.close();
    },
  };
}
