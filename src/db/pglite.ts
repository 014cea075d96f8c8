import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
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
  const pglite = dataDir === undefined ? new PGlite() : new PGlite(dataDir);
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
