import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/db.js';
import { openPostgres } from '../../src/db/pg.js';
import { TestClock } from '../helpers/clock.js';
import type { TestContext } from '../helpers/context.js';
import { createTestDatabase, testPoolMode, type TestDatabase } from '../helpers/database.js';
import { createVerifiedUser, postJson, refresh, refreshCookieOf, signIn, signUp, withBearer } from '../helpers/flows.js';
import { codeNow, enrolled, nextStep, passwordStep, secondStep } from '../helpers/mfa.js';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp.js';
import { createAppContext, ON_POSTGRES } from './helpers/app-context.js';
import { messageIdOf } from './helpers/fault-smtp.js';

/**
 * Two service instances on one PostgreSQL database, the way the service
 * scales out: two apps, each with its own connection pool and its own outbox worker running in
 * the background, sharing only the database, the signing key (one DATA_DIR) and the SMTP relay.
 * PostgreSQL only: PGlite is one process's embedded database.
 */

/** Emails queued under load through both instances. */
const QUEUED_EMAILS = 30;
/** Failed sign-ins per identifier allowed here (the default is 10). */
const SIGN_IN_LIMIT = 3;
/** How long the workers get to drain the outbox, in milliseconds (they poll every second). */
const DRAIN_WAIT_MS = 20_000;

describe.runIf(ON_POSTGRES)('two instances on one PostgreSQL (PostgreSQL only: PGlite is embedded in one process)', () => {
  let database: TestDatabase;
  let dataDir: string;
  let smtp: TestSmtpServer;
  let dbA: Db;
  let dbB: Db;
  let a: TestContext;
  let b: TestContext;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = mkdtempSync(path.join(tmpdir(), 'auth-two-'));
    smtp = await startSmtpServer();
    dbA = openPostgres({ url: database.url!, poolMax: 5, poolMode: testPoolMode() });
    dbB = openPostgres({ url: database.url!, poolMax: 5, poolMode: testPoolMode() });
    // One clock: instances on synchronised hosts.
    const clock = new TestClock();
    const shared = { database, smtp, dataDir, clock, startOutboxWorker: true, env: { RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: String(SIGN_IN_LIMIT) } };
    a = await createAppContext({ ...shared, db: dbA });
    b = await createAppContext({ ...shared, db: dbB });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await dbA?.close();
    await dbB?.close();
    await smtp?.close();
    await database?.drop();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  it('TOTP replay across instances: one code raced through A and B signs in at most once, every round; the secret enrolled through A works on B', async () => {
    const { user, secret } = await enrolled(a);
    for (let round = 0; round < 5; round++) {
      const code = codeNow(a, secret);
      const [ca, cb] = await Promise.all([passwordStep(a, user.username), passwordStep(b, user.username)]);
      const results = await Promise.all([secondStep(a, ca, { code }), secondStep(b, cb, { code })]);
      expect(results.map((r) => r.statusCode).sort()).toEqual([200, 401]);
      nextStep(a);
    }
  });

  it('a session revoked through A is refused at once by B (Bearer and refresh); revoke-all through B ends sessions on A', async () => {
    const user = await createVerifiedUser(a);
    const s = await signIn(a, { username: user.username, password: user.password });
    expect((await withBearer(b, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(200);
    expect((await withBearer(a, 'POST', '/auth/v0/logout', s.accessToken)).statusCode).toBe(204);
    expect((await withBearer(b, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(401);
    expect((await refresh(b, s.refreshToken)).statusCode).toBe(401);

    const onA = await signIn(a, { username: user.username, password: user.password });
    const onB = await signIn(b, { username: user.username, password: user.password });
    expect((await withBearer(b, 'DELETE', '/auth/v0/sessions', onB.accessToken)).statusCode).toBe(204);
    expect((await withBearer(a, 'GET', '/auth/v0/me', onA.accessToken)).statusCode).toBe(401);
    expect((await refresh(a, onA.refreshToken)).statusCode).toBe(401);
  });

  it('a refresh token rotated through A is reuse on B: 401 auth.refresh_token_reused, and the family is revoked for both', async () => {
    const user = await createVerifiedUser(b);
    const s = await signIn(b, { username: user.username, password: user.password });
    const rotated = await refresh(a, s.refreshToken);
    expect(rotated.statusCode).toBe(200);
    const next = refreshCookieOf(rotated).value;
    const reuse = await refresh(b, s.refreshToken);
    expect(reuse.statusCode).toBe(401);
    expect(reuse.json().code).toBe('auth.refresh_token_reused');
    expect((await refresh(a, next)).statusCode).toBe(401);
    expect((await withBearer(a, 'GET', '/auth/v0/me', rotated.json().tokens.access_token)).statusCode).toBe(401);
  });

  it(`${QUEUED_EMAILS} emails queued under load through both instances are each sent exactly once, both workers running`, async () => {
    const results = await Promise.all(Array.from({ length: QUEUED_EMAILS }, (_, i) => signUp(i % 2 === 0 ? a : b)));
    const emails = results.map((r) => {
      expect(r.res.statusCode, r.res.body).toBe(201);
      return r.body.user.email!;
    });
    const { rows } = await database.db.query<{ id: string }>('SELECT id FROM email_outbox WHERE recipient = ANY($1)', [emails]);
    expect(rows).toHaveLength(QUEUED_EMAILS);
    const expected = rows.map((r) => `<${r.id}@latchkey>`).sort();

    // Both background workers drain the outbox; no test code runs a round.
    const deadline = Date.now() + DRAIN_WAIT_MS;
    for (;;) {
      const pending = await database.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM email_outbox WHERE recipient = ANY($1) AND status <> 'sent'`, [emails]);
      if (pending.rows[0]!.n === 0) break;
      if (Date.now() > deadline) throw new Error(`${pending.rows[0]!.n} emails still unsent`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const received = smtp.messages.filter((m) => emails.some((e) => m.to.includes(e))).map((m) => messageIdOf(m.raw));
    expect(received.sort()).toEqual(expected);
    // Both workers took part (each logs the rows it sent).
    const sentBy = (c: TestContext): number => c.logs.filter((l) => l.msg === 'email sent' && rows.some((r) => r.id === l.outboxId)).length;
    expect(sentBy(a) + sentBy(b)).toBe(QUEUED_EMAILS);
    expect(sentBy(a)).toBeGreaterThan(0);
    expect(sentBy(b)).toBeGreaterThan(0);
  });

  it(`rate limits count across both: ${SIGN_IN_LIMIT} failed sign-ins split over A and B lock the identifier on both`, async () => {
    const user = await createVerifiedUser(a);
    for (let i = 0; i < SIGN_IN_LIMIT; i++) {
      const res = await postJson(i % 2 === 0 ? a : b, '/auth/v0/sign-in', { username: user.username, password: 'not the password at all' });
      expect(res.statusCode).toBe(401);
    }
    for (const instance of [a, b]) {
      const locked = await postJson(instance, '/auth/v0/sign-in', { username: user.username, password: user.password });
      expect(locked.statusCode).toBe(429);
      expect(locked.json().code).toBe('auth.sign_in.too_many_attempts');
      expect(Number(locked.headers['retry-after'])).toBeGreaterThan(0);
    }
  });
});
