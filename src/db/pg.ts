import pg from 'pg';
import type { Db, Queryable, QueryResult } from './db.js';

/** Options for {@link openPostgres}. */
export interface PostgresOptions {
  /** `postgres://` connection URL. */
  readonly url: string;
  /** Largest number of pooled connections. */
  readonly poolMax: number;
  /** How long to wait for a connection before failing, in milliseconds (keeps outages fast). */
  readonly connectionTimeoutMillis?: number;
  /**
   * `session` (default): each connection is one PostgreSQL session, so the start-up parameters
   * ({@link STATEMENT_TIMEOUT_MS}, {@link IDLE_IN_TRANSACTION_TIMEOUT_MS}) and named prepared
   * statements hold. `transaction`: behind PgBouncer in transaction mode, where consecutive
   * statements of one connection may run on different server sessions: no start-up parameters
   * (PgBouncer refuses them; set the timeouts on the database role instead, docs/operations.md)
   * and every statement unnamed (a named one would be missing, or already exist, on the next
   * server session). Nothing else of the service needs a session: its locks are row locks and
   * transaction-scoped advisory locks, and it never uses `LISTEN` or a session `SET`.
   */
  readonly poolMode?: 'session' | 'transaction';
}

/**
 * Default for {@link PostgresOptions.connectionTimeoutMillis}: how long a request waits for a
 * pooled connection (a new connection to an unreachable server, or a free one of a busy pool)
 * before it fails with 503. An outage answers in seconds, not minutes.
 */
export const DEFAULT_CONNECTION_TIMEOUT_MS = 5_000;

/**
 * PostgreSQL `statement_timeout`, sent at connection start: the server cancels any statement,
 * including its wait for a row lock, after this long (SQLSTATE 57014, answered 503). Every
 * statement of a request is an indexed single-row or small-batch operation that takes
 * milliseconds; one still running after 5 s is stuck behind a lock or an overloaded server, and
 * the caller is better answered than held. Lifted for the migrations' transaction only
 * (`SET LOCAL`, src/db/migrate.ts: they and their advisory lock may legitimately take longer).
 */
export const STATEMENT_TIMEOUT_MS = 5_000;

/**
 * Client-side limit on waiting for a statement's answer (pg `query_timeout`). Longer than
 * {@link STATEMENT_TIMEOUT_MS}, so the server's own cancellation answers first while it can; this
 * one fires only when the server or the network went silent (a half-open connection, a cut that
 * sent no reset), which no server-side setting can notice. The connection is then discarded.
 */
export const QUERY_TIMEOUT_MS = STATEMENT_TIMEOUT_MS + 1_000;

/**
 * PostgreSQL `idle_in_transaction_session_timeout`: the server ends a session that sits idle
 * inside a transaction for this long (its instance hung, or lost the network mid-transaction),
 * which releases its row locks for the other instances. The service's transactions never wait on
 * anything but their own statements (no network call inside one, docs/decisions.md#email-outbox).
 */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000;

/** pg's message when {@link QUERY_TIMEOUT_MS} fired: the connection may still be busy with the statement. */
const QUERY_READ_TIMEOUT = 'Query read timeout';

/**
 * Most distinct statement texts run as named (server-side prepared) statements; any further
 * ones run unnamed. The service's statements are fixed texts (a few dozen), so all of them are
 * prepared, while a connection can never accumulate prepared statements without bound.
 */
export const MAX_PREPARED_STATEMENTS = 200;
/** Statement name per SQL text, shared by every pool of the process (a name always means one text). */
const preparedNames = new Map<string, string>();

/**
 * The name under which `sql` runs as a prepared statement, or undefined to run it unnamed.
 * Prepared, PostgreSQL parses and plans a statement once per connection instead of on every
 * execution; for the indexed single-row statements of a request, planning took longer than
 * executing (docs/performance.md). Behind PgBouncer in transaction mode this needs its
 * `max_prepared_statements` (1.21 or newer).
 */
function preparedName(sql: string): string | undefined {
  let name = preparedNames.get(sql);
  if (name === undefined && preparedNames.size < MAX_PREPARED_STATEMENTS) {
    name = `auth_${preparedNames.size}`;
    preparedNames.set(sql, name);
  }
  return name;
}

function wrap(client: pg.Pool | pg.PoolClient, options: { queryTimeoutMs: number | undefined; prepare: boolean }): Queryable {
  return {
    async query<R>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
      // `query_timeout` per query is honoured by pg although its types do not list it.
      const config: pg.QueryConfig & { query_timeout?: number } = { text: sql, values: params as unknown[] };
      if (options.queryTimeoutMs !== undefined) config.query_timeout = options.queryTimeoutMs;
      // Statements with parameters only: BEGIN, COMMIT and the like stay one simple-protocol message.
      const name = options.prepare && params.length > 0 ? preparedName(sql) : undefined;
      if (name !== undefined) config.name = name;
      const result = await client.query(config);
      return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
    },
  };
}

/**
 * Opens a PostgreSQL connection pool behind the {@link Db} interface.
 * The pool connects lazily; a failed connection rejects the query that needed it.
 */
export function openPostgres(options: PostgresOptions): Db {
  const sessions = (options.poolMode ?? 'session') === 'session';
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolMax,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? DEFAULT_CONNECTION_TIMEOUT_MS,
    ...(sessions ? { statement_timeout: STATEMENT_TIMEOUT_MS, idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS } : {}),
  });
  // An idle client that loses its connection emits 'error' on the pool; without a listener
  // that would crash the process. The next query simply gets a fresh connection.
  pool.on('error', () => {});
  const timed = { queryTimeoutMs: QUERY_TIMEOUT_MS, prepare: sessions };
  const root = wrap(pool, timed);
  /**
   * Checks a connection out of the pool for several statements. A checked-out pg client has no
   * 'error' listener (the pool removes its own while the client is lent), and a connection
   * reset emits 'error' on it even while a statement awaits its answer: unheard, that would
   * crash the process. The listener here only marks the connection broken (the statement in
   * flight fails on its own); `release` discards a broken connection instead of pooling it.
   */
  const checkout = async (): Promise<{ client: pg.PoolClient; markBroken(): void; release(): void }> => {
    const client = await pool.connect();
    let broken = false;
    const onError = (): void => {
      broken = true;
    };
    client.on('error', onError);
    return {
      client,
      markBroken: () => void (broken = true),
      release() {
        client.removeListener('error', onError);
        client.release(broken);
      },
    };
  };
  return {
    kind: 'postgres',
    query: root.query,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const conn = await checkout();
      const tx = wrap(conn.client, timed);
      try {
        await tx.query('BEGIN');
        const result = await fn(tx);
        await tx.query('COMMIT');
        return result;
      } catch (err) {
        // After a read timeout the connection may still be busy with the statement: a ROLLBACK
        // would wait behind it. Discard the connection instead; the server rolls back when it
        // goes (or after IDLE_IN_TRANSACTION_TIMEOUT_MS if it never hears of it).
        if ((err as Error | undefined)?.message === QUERY_READ_TIMEOUT) conn.markBroken();
        else {
          try {
            await tx.query('ROLLBACK');
          } catch {
            conn.markBroken();
          }
        }
        throw err;
      } finally {
        conn.release();
      }
    },
    async exec(sql: string): Promise<void> {
      await pool.query(sql);
    },
    async withConnection(fn) {
      // No client-side query timeout: migrations may run long and wait for another instance's
      // lock (they lift the server's statement_timeout for their transaction, src/db/migrate.ts).
      const conn = await checkout();
      const { client } = conn;
      try {
        const q = wrap(client, { queryTimeoutMs: undefined, prepare: false });
        return await fn({ query: q.query, exec: async (sql: string) => void (await client.query(sql)) });
      } catch (err) {
        // A failure mid-transaction may leave the connection inside it: never pool it again.
        conn.markBroken();
        throw err;
      } finally {
        conn.release();
      }
    },
    // Closing twice is a no-op, as with PGlite (pg's pool throws on a second end()).
    async close(): Promise<void> {
      if (!pool.ending && !pool.ended) await pool.end();
    },
  };
}
