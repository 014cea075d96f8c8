/**
 * Health probes: `GET /healthz` answers 200 while the process serves;
 * `GET /readyz` answers 200 only when the database answers `SELECT 1` and its schema is
 * current, else 503 `service_unavailable`. Both outside `/auth/v0`, both `no-store`.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, createLogger } from '../../src/app.js';
import { TEST_ARGON2, createTestContext, type TestContext } from '../helpers/context.js';
import { createPasswordHasher } from '../../src/crypto/password.js';
import { createTestDatabase } from '../helpers/database.js';
import { keysOf } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

const get = (app: FastifyInstance, url: string) => app.inject({ method: 'GET', url });

describe('GET /healthz', () => {
  it('answers 200 {"status":"ok"}, JSON, no-store', async () => {
    const res = await get(ctx.app, '/healthz');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('is outside the API prefix', async () => {
    expect((await get(ctx.app, '/auth/v0/healthz')).statusCode).toBe(404);
    expect((await get(ctx.app, '/auth/v0/readyz')).statusCode).toBe(404);
  });
});

describe('GET /readyz', () => {
  it('answers 200 {"status":"ready"} when the database answers and the schema is current', async () => {
    const res = await get(ctx.app, '/readyz');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ready' });
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('successful probes stay out of the info-level request log', async () => {
    const from = ctx.logs.length;
    await get(ctx.app, '/healthz');
    await get(ctx.app, '/readyz');
    expect(ctx.logs.slice(from).filter((l) => l.msg === 'request completed')).toEqual([]);
  });

  it('answers 503 service_unavailable when the schema is behind (a migration not applied), and 200 again once it is', async () => {
    const { rows } = await ctx.db.query<{ version: string; name: string; md5: string; run_at: Date }>(
      'SELECT * FROM schema_version WHERE version = (SELECT max(version) FROM schema_version)',
    );
    const newest = rows[0]!;
    await ctx.db.query('DELETE FROM schema_version WHERE version = $1', [newest.version]);
    try {
      const from = ctx.logs.length;
      const res = await get(ctx.app, '/readyz');
      expect(res.statusCode).toBe(503);
      expect(keysOf(res.json())).toEqual(['code', 'message']);
      expect(res.json().code).toBe('service_unavailable');
      expect(res.json().message).toMatch(/schema/);
      expect(res.headers['cache-control']).toBe('no-store');
      // The liveness probe does not depend on the database.
      expect((await get(ctx.app, '/healthz')).statusCode).toBe(200);
      // The change of state is logged once, and the failed probe is in the request log.
      await get(ctx.app, '/readyz');
      const lines = ctx.logs.slice(from);
      expect(lines.filter((l) => l.msg === 'not ready')).toEqual([expect.objectContaining({ level: 40, problem: 'schema' })]);
      expect(lines.filter((l) => l.msg === 'request completed' && l.route === '/readyz' && l.status === 503)).toHaveLength(2);
    } finally {
      await ctx.db.query('INSERT INTO schema_version (version, name, md5, run_at) VALUES ($1, $2, $3, $4)', [newest.version, newest.name, newest.md5, newest.run_at]);
    }
    expect((await get(ctx.app, '/readyz')).statusCode).toBe(200);
  });

  it('answers 503 when the database is closed, while /healthz and /metrics still answer 200', async () => {
    const database = await createTestDatabase();
    const app = await buildApp({
      config: ctx.config,
      db: database.db,
      passwordHasher: await createPasswordHasher(TEST_ARGON2),
      logger: createLogger('silent'),
      startOutboxWorker: false,
    });
    await app.ready();
    try {
      expect((await get(app, '/readyz')).statusCode).toBe(200);
      // Closes the connection (a pooled PGlite closed here is not handed to another file), and
      // drops the database on PostgreSQL.
      await database.db.close();
      await database.drop();
      const res = await get(app, '/readyz');
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ code: 'service_unavailable', message: 'The database cannot be reached.' });
      expect((await get(app, '/healthz')).statusCode).toBe(200);
      // A scrape never fails because the database is down: no outbox counts, the age unknown (NaN).
      const metrics = await get(app, '/metrics');
      expect(metrics.statusCode).toBe(200);
      expect(metrics.body).toContain('auth_http_requests_total');
      expect(metrics.body).not.toMatch(/^auth_outbox_emails\{/m);
      expect(metrics.body).toMatch(/^auth_outbox_oldest_pending_age_seconds nan$/im);
    } finally {
      await app.close();
    }
  });
});
