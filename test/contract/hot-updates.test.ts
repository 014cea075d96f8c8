import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * The updates the hot paths make stay on their page and touch no index (PostgreSQL's HOT
 * updates; migration 019, docs/performance.md "At a million users"): the columns they write are
 * read by no index (as a key, in an expression or in a partial index's WHERE), and the tables
 * leave room on each page for the new row version. An index added later on one of these
 * columns would quietly make every refresh, Bearer request or sign-in write to it: this test
 * says so instead.
 */
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database.drop());

/** Column written on a hot path, by table: what writes it. */
const HOT_COLUMNS: ReadonlyArray<readonly [table: string, column: string, writer: string]> = [
  ['refresh_tokens', 'rotated_at', 'every refresh (the rotation)'],
  ['refresh_tokens', 'successor_ciphertext', 'every refresh (NULL over NULL under the strict rule)'],
  ['sessions', 'last_used_at', 'a Bearer request or a refresh, once a minute per session'],
  ['users', 'last_sign_in_at', 'every sign-in'],
];

/** Indexes of `table` that read `column` as a key, in an expression or in their predicate. */
async function indexesReading(table: string, column: string): Promise<string[]> {
  const { rows } = await database.db.query<{ index: string }>(
    `SELECT ic.relname AS index
       FROM pg_index i
       JOIN pg_class ic ON ic.oid = i.indexrelid
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attname = $2
      WHERE i.indrelid = $1::regclass
        AND (a.attnum = ANY(i.indkey::int2[])
             OR coalesce(pg_get_expr(i.indexprs, i.indrelid), '') ~ ('\\m' || $2 || '\\M')
             OR coalesce(pg_get_expr(i.indpred, i.indrelid), '') ~ ('\\m' || $2 || '\\M'))
      ORDER BY 1`,
    [table, column],
  );
  return rows.map((r) => r.index);
}

describe('hot-path updates are HOT updates (migration 019)', () => {
  it.each(HOT_COLUMNS)('no index of %s reads %s (written by %s)', async (table, column) => {
    expect(await indexesReading(table, column)).toEqual([]);
  });

  it('the check finds an index that reads a column in its predicate', async () => {
    // The same query on the index that migration 019 removed: the check is not blind to predicates.
    await database.db.exec('CREATE INDEX hot_check_probe ON refresh_tokens (session_id) WHERE rotated_at IS NULL');
    try {
      expect(await indexesReading('refresh_tokens', 'rotated_at')).toEqual(['hot_check_probe']);
    } finally {
      await database.db.exec('DROP INDEX hot_check_probe');
    }
  });

  it('sessions, users and refresh_tokens leave room on each page for the new row version', async () => {
    const { rows } = await database.db.query<{ relname: string; reloptions: string[] | null }>(
      "SELECT relname, reloptions FROM pg_class WHERE relname IN ('sessions', 'users', 'refresh_tokens') AND relkind = 'r' ORDER BY relname",
    );
    const fillfactor = Object.fromEntries(
      rows.map((r) => [r.relname, Number((r.reloptions ?? []).find((o) => o.startsWith('fillfactor='))?.split('=')[1] ?? 100)]),
    );
    expect(fillfactor).toEqual({ refresh_tokens: 80, sessions: 85, users: 85 });
  });

  it('a family stays a single chain: a second first token and a second successor are refused', async () => {
    const { rows } = await database.db.query<{ id: string }>(
      `WITH u AS (INSERT INTO users (id, username, email, password_hash, created_at, updated_at) VALUES (gen_random_uuid(), 'hot_check', 'hot_check@example.test', 'x', now(), now()) RETURNING id)
       INSERT INTO sessions (id, user_id, created_at, expires_at) SELECT gen_random_uuid(), u.id, now(), now() + interval '1 day' FROM u RETURNING id`,
    );
    const sessionId = rows[0]!.id;
    const insert = (id: string, parent: string | null) =>
      database.db.query('INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at) VALUES ($1, $2, $3, $4, now())', [id, sessionId, `hash-${id}`, parent]);
    const root = '00000000-0000-7000-8000-000000000001';
    await insert(root, null);
    await expect(insert('00000000-0000-7000-8000-000000000002', null)).rejects.toThrow(/refresh_tokens_one_root_per_session/);
    await insert('00000000-0000-7000-8000-000000000003', root);
    await expect(insert('00000000-0000-7000-8000-000000000004', root)).rejects.toThrow(/refresh_tokens_one_successor/);
  });
});
