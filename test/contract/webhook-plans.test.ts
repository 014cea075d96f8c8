import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordEvents } from '../../src/modules/events/events.repo.js';
import {
  claimDueDeliveries,
  countDeliveryBacklog,
  fanOutEvents,
  listDeliveries,
  oldestPendingDeliveryCreatedAt,
  purgeEvents,
  purgeFinishedDeliveries,
  releaseDeliveryLeases,
  retryDelivery,
} from '../../src/modules/webhooks/webhooks.repo.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { seqScans, statementsOf } from '../helpers/plans.js';

/**
 * The worker's idle round, the scrape, the purges and the operator's listings read indexes, never
 * a whole table of events or deliveries (docs/performance.md): their cost follows the backlog,
 * not the history. The planner chooses by table statistics, so only a PostgreSQL table of many
 * rows shows it; recording an event reads `webhook_endpoints` whole, a table of a handful of rows.
 */

const ROWS = 300_000;
const T0 = new Date('2026-03-01T00:00:00Z');
const ENDPOINT = '5b7a1f8e-2c4d-4e6f-8a0b-1c2d3e4f5a6b';
const DELIVERY = '00000000-0000-7000-8000-000000000001';

describe.runIf(process.env.TEST_DB === 'postgres')(`webhook statements use indexes (PostgreSQL, ${ROWS} events, half with a delivery)`, () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
    const db = database.db;
    await db.query(
      `INSERT INTO webhook_endpoints (id, url, event_types, secret, created_at, updated_at) VALUES ($1, 'https://hooks.example.com/', '{*}', 'v1.x.y.z', $2, $2)`,
      [ENDPOINT, T0],
    );
    // History: fanned-out events, half of them with a delivery (the rest had no subscriber, or
    // their delivered deliveries were purged): mostly delivered, some dead, a few pending later or held.
    // A plain client without the service's time limits: the setup writes 450 000 rows.
    const setup = new pg.Client({ connectionString: database.url });
    await setup.connect();
    try {
      await setup.query(
      `WITH e AS (
         INSERT INTO webhook_events (id, type, data, occurred_at)
         SELECT uuid_v7($1::timestamptz - make_interval(secs => $2 - i)), 'session.created', '{"user_id":"x"}', $1::timestamptz - make_interval(secs => $2 - i)
           FROM generate_series(1, $2::int) AS i
         RETURNING id, occurred_at
       )
       INSERT INTO webhook_deliveries (id, event_id, endpoint_id, event_type, status, held, attempts, next_attempt_at, created_at)
       SELECT uuid_v7(e.occurred_at), e.id, $3, 'session.created',
              CASE WHEN n % 1000 = 0 THEN 'dead' WHEN n % 998 = 0 THEN 'pending' ELSE 'delivered' END,
              n % 1996 = 0, 1,
              CASE WHEN n % 1000 <> 0 AND n % 998 = 0 THEN $1::timestamptz + interval '1 hour' END, e.occurred_at
         FROM (SELECT id, occurred_at, row_number() OVER () AS n FROM e) e
        WHERE n % 2 = 0`,
        [T0, ROWS, ENDPOINT],
      );
      await setup.query('ANALYZE');
    } finally {
      await setup.end();
    }
  }, 180_000);
  afterAll(async () => database?.drop());

  const scans = async (run: Parameters<typeof statementsOf>[0]) => {
    const statements = await statementsOf(run);
    expect(statements.length).toBeGreaterThan(0);
    return Promise.all(statements.map(async (s) => ({ sql: s.sql.replace(/\s+/g, ' ').slice(0, 80), tables: await seqScans(database.db, s) })));
  };

  it('the idle round: fan-out and claim, and the release of leases', async () => {
    for (const s of [
      ...(await scans((q) => fanOutEvents(q, { now: T0, limit: 200 }))),
      ...(await scans((q) => claimDueDeliveries(q, { owner: 'w', now: T0, leaseUntil: T0, limit: 32 }))),
      ...(await scans((q) => releaseDeliveryLeases(q, 'w'))),
    ]) {
      expect(s.tables.filter((t) => t !== 'webhook_endpoints'), s.sql).toEqual([]);
    }
  });

  it('recording an event reads no table but the endpoints', async () => {
    for (const s of await scans((q) => recordEvents(q, [{ type: 'mfa.enabled', data: { user_id: 'x' } }], T0))) expect(s.tables.filter((t) => t !== 'webhook_endpoints'), s.sql).toEqual([]);
  });

  it('the scrape, the purges, the listings and a retry', async () => {
    const statements = [
      ...(await scans((q) => countDeliveryBacklog(q))),
      ...(await scans((q) => oldestPendingDeliveryCreatedAt(q))),
      ...(await scans((q) => purgeFinishedDeliveries(q, { status: 'delivered', before: T0, limit: 1000 }))),
      ...(await scans((q) => purgeFinishedDeliveries(q, { status: 'dead', before: T0, limit: 1000 }))),
      ...(await scans((q) => purgeEvents(q, { before: T0, limit: 1000 }))),
      ...(await scans((q) => listDeliveries(q, ENDPOINT, { limit: 51 }))),
      ...(await scans((q) => listDeliveries(q, ENDPOINT, { status: 'dead', before: DELIVERY, limit: 51 }))),
      ...(await scans((q) => retryDelivery(q, ENDPOINT, DELIVERY, T0))),
    ];
    for (const s of statements) expect(s.tables.filter((t) => t !== 'webhook_endpoints'), s.sql).toEqual([]);
  });
});
