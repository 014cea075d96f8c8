import pg from 'pg';
import type { Db, Queryable, QueryResult } from './db.js';

/** Options for {@link openPostgres}. */
export interface PostgresOptions {
  /** `postgres://` connection URL. */
  readonly url: string;
  /** Largest number of pooled connections. */
  readonly poolMax: number;
  /** How long to wait for a connection before failing, in milliseconds (keeps outages fast, issue 4). */
  readonly connectionTimeoutMillis?: number;
}

/** Default for {@link PostgresOptions.connectionTimeoutMillis}: an outage answers 503 in seconds, not minutes. */
const DEFAULT_CONNECTION_TIMEOUT_MS = 5000;

function wrap(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    async query<R>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
      const result = await client.query(sql, params as unknown[]);
      return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
    },
  };
}

/**
 * Opens a PostgreSQL connection pool behind the {@link Db} interface.
 * The pool connects lazily; a failed connection rejects the query that needed it.
 */
export function openPostgres(options: PostgresOptions): Db {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolMax,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? DEFAULT_CONNECTION_TIMEOUT_MS,
  });
  // An idle client that loses its connection emits 'error' on the pool; without a listener
  // that would crash the process. The next query simply gets a fresh connection.
  pool.on('error', () => {});
  const root = wrap(pool);
  return {
    kind: 'postgres',
    query: root.query,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        const result = await fn(wrap(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch {
          broken = true;
        }
        throw err;
      } finally {
        client.release(broken);
      }
    },
    async exec(sql: string): Promise<void> {
      await pool.query(sql);
    },
    async withConnection(fn) {
      const client = await pool.connect();
      try {
        const q = wrap(client);
        return await fn({ query: q.query, exec: async (sql: string) => void (await client.query(sql)) });
      } finally {
        client.release();
      }
    },
    async close(): Promise<void> {
      await pool.end();
    },
  };
}
