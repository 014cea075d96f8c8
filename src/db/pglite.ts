import { mkdirSync } from 'node:fs';
import type { PGlite } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult } from './db.js';

/**
 * Opens the embedded PGlite database (PostgreSQL compiled to WebAssembly).
 *
 * @param dataDir directory holding the database files; undefined keeps it in memory (tests).
 * PGlite has a single connection: its `query` and `transaction` share one mutex, so
 * transactions are serialised and a statement outside a transaction never runs inside one.
 */
export async function openPglite(dataDir: string | undefined): Promise<Db> {
  if (dataDir !== undefined) mkdirSync(dataDir, { recursive: true });
  // Imported here, not at the top: in the bundle (scripts/bundle.mjs) this module is inlined
  // into the one file, where a top-level import would load PGlite on every start.
  const { PGlite: PGliteDatabase } = await import('@electric-sql/pglite');
  const pglite = dataDir === undefined ? new PGliteDatabase() : new PGliteDatabase(dataDir);
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
    withConnection: (fn) => fn({ query: root.query, exec }),
    async close(): Promise<void> {
      if (!pglite.closed) await pglite.close();
    },
  };
}
