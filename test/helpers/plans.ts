import type { Queryable } from '../../src/db/db.js';

/** A statement as a repository function sends it. */
export interface Statement {
  readonly sql: string;
  readonly params: readonly unknown[];
}

/** Every node of an EXPLAIN (FORMAT JSON) plan. */
function planNodes(plan: Record<string, unknown>): Record<string, unknown>[] {
  const children = (plan.Plans as Record<string, unknown>[] | undefined) ?? [];
  return [plan, ...children.flatMap(planNodes)];
}

/** The statements `run` sends, recorded instead of run (EXPLAIN then plans them with their parameters). */
export async function statementsOf(run: (q: Queryable) => Promise<unknown>): Promise<Statement[]> {
  const seen: Statement[] = [];
  const recorder: Queryable = {
    async query<R>(sql: string, params: readonly unknown[] = []) {
      seen.push({ sql, params });
      return { rows: [] as R[], rowCount: 0 };
    },
  };
  await run(recorder).catch(() => undefined);
  return seen;
}

/** Tables `statement`'s plan on `db` reads with a sequential scan. */
export async function seqScans(db: Queryable, statement: Statement): Promise<string[]> {
  const { rows } = await db.query<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(`EXPLAIN (FORMAT JSON) ${statement.sql}`, statement.params);
  return planNodes(rows[0]!['QUERY PLAN'][0].Plan)
    .filter((n) => n['Node Type'] === 'Seq Scan')
    .map((n) => String(n['Relation Name']));
}
