/** A row set: the rows and, for INSERT/UPDATE/DELETE, how many rows the statement touched. */
export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

/**
 * Something that runs one parameterised statement: the database itself or an open transaction.
 * Repository functions take a `Queryable` as their first argument (STYLE habit 3).
 */
export interface Queryable {
  /** Runs `sql` with `$1..$n` parameters; rejects with the driver's error (SQLSTATE in `code`). */
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
}

/**
 * The one database interface the service uses, implemented for PostgreSQL (`pg`) and for
 * the embedded PGlite. Both speak the same SQL dialect and share one set of migrations.
 */
export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /**
   * Runs `fn` inside BEGIN/COMMIT on one connection; rolls back and rethrows if `fn` throws.
   * Only services open transactions; no network call may happen inside `fn`.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Runs a multi-statement SQL script (migrations) without parameters. */
  exec(sql: string): Promise<void>;
  /**
   * Runs `fn` with one dedicated connection (advisory locks must stay on one session).
   * PGlite has only one connection, so it passes itself.
   */
  withConnection<T>(fn: (conn: Queryable & { exec(sql: string): Promise<void> }) => Promise<T>): Promise<T>;
  /** Closes every connection; closing an already closed database does nothing. */
  close(): Promise<void>;
}

/** SQLSTATE 23505: a unique constraint was violated. */
export const UNIQUE_VIOLATION = '23505';

/** The SQLSTATE code of a driver error, if it has one. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The constraint a driver error names (unique violations), if any. */
export function constraintName(err: unknown): string | undefined {
  const c = (err as { constraint?: unknown } | null)?.constraint;
  return typeof c === 'string' ? c : undefined;
}
