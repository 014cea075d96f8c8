import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forgiveHits, hitWindowsAfter, purgeWindows } from '../../src/modules/rate-limits/rate-limits.repo.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database.drop());

const T0 = new Date('2026-01-01T00:00:00Z');
const at = (seconds: number): Date => new Date(T0.getTime() + seconds * 1000);

async function hitsOf(key: string): Promise<number | undefined> {
  const { rows } = await database.db.query<{ hits: number }>('SELECT hits FROM rate_limits WHERE key = $1', [key]);
  return rows[0]?.hits;
}

describe('hitWindowsAfter: the counts of one request in one statement', () => {
  it('counts the first key, then every other key, and returns the rows of the read in the same round trip', async () => {
    // The read names its parameters where it writes them, after the counts' own (SqlParams).
    const { windows, rows } = await hitWindowsAfter<{ answer: number; text: string }>(
      database.db,
      { first: { key: 'c:ip', windowSeconds: 900, limit: 2 }, keys: ['c:a', 'c:b'], windowSeconds: 900, now: T0 },
      (p) => `SELECT ${p.add(42)}::int AS answer, ${p.add('x')}::text AS text`,
    );
    expect(windows.map((w) => [w.key, w.hits])).toEqual([
      ['c:ip', 1],
      ['c:a', 1],
      ['c:b', 1],
    ]);
    expect(windows[0]!.windowStart.getTime()).toBe(T0.getTime());
    expect(rows).toEqual([{ answer: 42, text: 'x' }]);
  });

  it('stops after the first key once it is over its limit: the others are not counted', async () => {
    const first = { key: 'g:ip', windowSeconds: 900, limit: 1 };
    await hitWindowsAfter(database.db, { first: first, keys: ['g:a'], windowSeconds: 900, now: T0 });
    const { windows } = await hitWindowsAfter(database.db, { first: first, keys: ['g:a'], windowSeconds: 900, now: at(1) });
    expect(windows.map((w) => [w.key, w.hits])).toEqual([['g:ip', 2]]);
    expect(await hitsOf('g:a')).toBe(1);
  });

  it('starts a new window once the old one ended, per key', async () => {
    await hitWindowsAfter(database.db, { first: undefined, keys: ['w:a'], windowSeconds: 60, now: T0 });
    await hitWindowsAfter(database.db, { first: undefined, keys: ['w:a'], windowSeconds: 60, now: at(30) });
    const { windows } = await hitWindowsAfter(database.db, { first: undefined, keys: ['w:a'], windowSeconds: 60, now: at(61) });
    expect(windows.map((w) => [w.key, w.hits, w.windowStart.getTime()])).toEqual([['w:a', 1, at(61).getTime()]]);
  });

  it('forgiveHits takes one back from each key and never goes below zero', async () => {
    await hitWindowsAfter(database.db, { first: undefined, keys: ['f:a', 'f:b'], windowSeconds: 900, now: T0 });
    await forgiveHits(database.db, ['f:a', 'f:b', 'f:missing']);
    await forgiveHits(database.db, ['f:a']);
    expect([await hitsOf('f:a'), await hitsOf('f:b'), await hitsOf('f:missing')]).toEqual([0, 0, undefined]);
  });
});

describe('purgeWindows', () => {
  it('deletes windows that started before the cut-off and keeps the others', async () => {
    await hitWindowsAfter(database.db, { first: undefined, keys: ['p:old'], windowSeconds: 900, now: at(-90_000) });
    await hitWindowsAfter(database.db, { first: undefined, keys: ['p:new'], windowSeconds: 900, now: T0 });
    expect(await purgeWindows(database.db, at(-86_400))).toBeGreaterThanOrEqual(1);
    expect([await hitsOf('p:old'), await hitsOf('p:new')]).toEqual([undefined, 1]);
  });

  // PGlite has one connection: a second statement cannot run while a transaction holds a row.
  it.runIf(process.env.TEST_DB === 'postgres')('skips a row another transaction holds instead of waiting for it (no deadlock with a multi-key count)', async () => {
    await hitWindowsAfter(database.db, { first: undefined, keys: ['s:held', 's:free'], windowSeconds: 900, now: at(-90_000) });
    await database.db.transaction(async (tx) => {
      await tx.query("SELECT key FROM rate_limits WHERE key = 's:held' FOR UPDATE");
      await purgeWindows(database.db, at(-86_400));
    });
    expect([await hitsOf('s:held'), await hitsOf('s:free')]).toEqual([1, undefined]);
  });
});
