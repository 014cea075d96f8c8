import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, prepareSchema, SchemaBehindError, schemaStatus } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database.drop());

describe('migrations (docs/operations.md)', () => {
  it('a migrated database is current and migrating again applies nothing', async () => {
    const status = await schemaStatus(database.db);
    expect(status.current).toBe(status.latest);
    expect(status.latest).toBeGreaterThanOrEqual(1);
    expect(await migrate(database.db)).toEqual([]);
  });

  it('parallel migrations (several instances starting at once) serialise under the advisory lock', async () => {
    const results = await Promise.all([migrate(database.db), migrate(database.db), migrate(database.db)]);
    expect(results).toEqual([[], [], []]);
  });

  it('with MIGRATE_ON_START=false the start refuses a schema that is behind', async () => {
    await database.db.exec('DELETE FROM schema_version');
    await expect(prepareSchema(database.db, { migrateOnStart: false })).rejects.toBeInstanceOf(SchemaBehindError);
    await expect(prepareSchema(database.db, { migrateOnStart: false })).rejects.toThrow(/npm run migrate/);
  });
});
