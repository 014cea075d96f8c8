import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp.js';
import { startService, type ServiceProcess } from './helpers/service-process.js';

/**
 * Two real service processes (`node dist/service/main.js`) started at the same moment on one
 * empty PostgreSQL database, as a deployment behind a pooler does (docs/operations.md, "Behind a
 * connection pooler"). `.ci/run` runs this file directly against PostgreSQL and again through
 * PgBouncer in transaction mode (TEST_DATABASE_POOL_MODE=transaction, which the spawned services
 * get as DATABASE_POOL_MODE): there, consecutive statements of one connection run on different
 * server sessions, so anything that relied on a session (a named statement, a session lock, a
 * session `SET`) breaks. What each instance relies on must still hold: the migrations race and
 * apply once, a refresh-token family rotates once under refreshes racing through both, and each
 * queued email is delivered exactly once by the two outbox workers.
 */
const ON_POSTGRES = process.env.TEST_DB === 'postgres';
const MIGRATIONS = readdirSync(path.resolve(import.meta.dirname, '../../migrations')).filter((f) => /^\d+\.do\./.test(f)).length;
const PARALLEL_REFRESHES = 16;
const QUEUED_EMAILS = 20;

let adminUrl: string;
let dbUrl: string;
let dbName: string;
let smtp: TestSmtpServer;
const dataDirs: string[] = [];
let a: ServiceProcess;
let b: ServiceProcess;

async function admin<T>(fn: (c: pg.Client) => Promise<T>, url = adminUrl): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

describe.runIf(ON_POSTGRES)('two instances started together on one empty database', () => {
  beforeAll(async () => {
    adminUrl = process.env.TEST_DATABASE_URL!;
    dbName = `auth_pooled_${randomBytes(6).toString('hex')}`;
    await admin((c) => c.query(`CREATE DATABASE ${dbName}`));
    const url = new URL(adminUrl);
    url.pathname = `/${dbName}`;
    dbUrl = url.toString();
    smtp = await startSmtpServer();
    const env = (): Record<string, string> => {
      const dataDir = mkdtempSync(path.join(tmpdir(), 'auth-pooled-'));
      dataDirs.push(dataDir);
      return {
        DATA_DIR: dataDir,
        DATABASE_URL: dbUrl,
        DATABASE_POOL_MAX: '5',
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(smtp.port),
        SMTP_TLS: 'none',
        SMTP_FROM: 'auth@example.test',
        RATE_LIMIT_SIGN_UP_PER_IP: '0',
        RATE_LIMIT_SIGN_IN_PER_IP: '0',
        RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '0',
      };
    };
    // Both apply the migrations at start (MIGRATE_ON_START defaults to true), at the same moment.
    [a, b] = await Promise.all([startService(env()), startService(env())]);
  }, 120_000);

  afterAll(async () => {
    for (const s of [a, b]) {
      if (s !== undefined && s.child.exitCode === null) {
        s.child.kill('SIGTERM');
        await s.exited;
      }
    }
    await smtp?.close();
    if (dbName !== undefined) await admin((c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`));
    for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
  });

  it('the migrations raced and were applied once each: both instances listen on the newest schema', async () => {
    // postgrator's own row 0, then one row per migration.
    const versions = await admin((c) => c.query<{ version: string }>('SELECT version FROM schema_version WHERE version > 0 ORDER BY version'), dbUrl);
    expect(versions.rows.map((r) => Number(r.version))).toEqual(Array.from({ length: MIGRATIONS }, (_v, i) => i + 1));
    const applied = [...a.logs, ...b.logs].filter((l) => Array.isArray(l.applied) && (l.applied as unknown[]).length > 0);
    expect(applied).toHaveLength(1);
  });

  it(`${PARALLEL_REFRESHES} refreshes of one token racing through both instances: at most one 200, never a second live token`, async () => {
    const username = `pooled_${randomBytes(4).toString('hex')}`;
    const password = 'correct horse battery staple';
    const signUp = await fetch(`${a.url}/auth/v0/sign-up`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, phone: `+1555${Date.now() % 10_000_000}`, password }) });
    expect(signUp.status).toBe(201);
    const signIn = await fetch(`${b.url}/auth/v0/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password }) });
    expect(signIn.status).toBe(200);
    const cookie = /refresh_token=([^;]+)/.exec(signIn.headers.get('set-cookie') ?? '')![1]!;
    const answers = await Promise.all(
      Array.from({ length: PARALLEL_REFRESHES }, (_v, i) => fetch(`${(i % 2 === 0 ? a : b).url}/auth/v0/refresh`, { method: 'POST', headers: { cookie: `refresh_token=${cookie}` } })),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(1);
    expect(statuses.every((s) => s === 200 || s === 401)).toBe(true);
    const live = await admin(
      (c) =>
        c.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id JOIN users u ON u.id = s.user_id
            WHERE u.username = $1 AND t.rotated_at IS NULL AND s.revoked_at IS NULL`,
          [username],
        ),
      dbUrl,
    );
    expect(live.rows[0]!.n).toBeLessThanOrEqual(1);
  });

  it(`${QUEUED_EMAILS} emails queued through both instances are each delivered exactly once`, async () => {
    const tag = randomBytes(4).toString('hex');
    const recipients = Array.from({ length: QUEUED_EMAILS }, (_v, i) => `pooled_${tag}_${i}@example.test`);
    const created = await Promise.all(
      recipients.map((email, i) =>
        fetch(`${(i % 2 === 0 ? a : b).url}/auth/v0/sign-up`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: `pooled_${tag}_${i}`, email, password: 'correct horse battery staple' }),
        }),
      ),
    );
    expect(created.map((r) => r.status)).toEqual(recipients.map(() => 201));
    const delivered = (): number => smtp.messages.filter((m) => recipients.some((r) => m.to.includes(r))).length;
    for (let i = 0; i < 300 && delivered() < QUEUED_EMAILS; i++) await new Promise((r) => setTimeout(r, 100));
    // A little longer: a second delivery of any of them would arrive now.
    await new Promise((r) => setTimeout(r, 1500));
    for (const r of recipients) expect(smtp.messages.filter((m) => m.to.includes(r))).toHaveLength(1);
  });
});
