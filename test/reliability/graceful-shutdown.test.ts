import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/db.js';
import { PGLITE_SUBDIR } from '../../src/db/open.js';
import { openPglite } from '../../src/db/pglite.js';
import { STOP_WAIT_MS } from '../../src/modules/mail/outbox.worker.js';
import { SHUTDOWN_TIMEOUT_MS } from '../../src/serve.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { PASSWORD, uniqueName } from '../helpers/flows.js';
import { ON_POSTGRES } from './helpers/app-context.js';
import { startFaultSmtpServer, type FaultSmtpServer } from './helpers/fault-smtp.js';
import { connectionRefused, exitWithin, startService, stopService, type ServiceProcess } from './helpers/service-process.js';

/**
 * Graceful shutdown of the real service, `node dist/service/main.js`, on
 * 127.0.0.1: SIGTERM while requests are in flight and while the outbox worker holds a lease on
 * a row whose SMTP send hangs. On PGlite (in DATA_DIR) and, in the postgres project, on a fresh
 * PostgreSQL database.
 */

/** How long the test waits for something the service does on its own (a claim, a delivery). */
const WAIT_MS = 15_000;
/** How soon after SIGTERM new connections must be refused. */
const REFUSE_WITHIN_MS = 2_000;

let dataDir: string;
let database: TestDatabase | undefined;
let smtp: FaultSmtpServer;
let service: ServiceProcess | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'auth-shutdown-'));
  if (ON_POSTGRES) database = await createTestDatabase();
  smtp = await startFaultSmtpServer({ stalled: true });
});
afterAll(async () => {
  await stopService(service);
  await smtp?.close();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

function serviceEnv(): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    ...(database === undefined ? {} : { DATABASE_URL: database.url! }),
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(smtp.port),
    SMTP_TLS: 'none',
    SMTP_FROM: 'auth@example.test',
    RATE_LIMIT_SIGN_UP_PER_IP: '0',
  };
}

/**
 * Runs `fn` on the service's database: PostgreSQL at any time; PGlite only while no service
 * runs (one process at a time may open its directory).
 */
async function withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  if (database !== undefined) return fn(database.db);
  const db = await openPglite(path.join(dataDir, PGLITE_SUBDIR));
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function postJson(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** A raw HTTP answer. */
interface RawResponse {
  status: number;
  head: string;
  body: string;
}

/**
 * A POST whose headers and first half of the body are sent at once and the rest only on
 * `finish()`: from the server's point of view a request in flight (routed, hooks run, body
 * still arriving) for as long as the test wants.
 */
function startPartialPost(port: number, url: string, body: unknown): { sent: Promise<void>; finish(): Promise<RawResponse> } {
  const payload = Buffer.from(JSON.stringify(body));
  const half = Math.floor(payload.length / 2);
  const head = `POST ${url} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\nConnection: close\r\n\r\n`;
  const { socket, response } = rawExchange(port);
  const sent = new Promise<void>((resolve, reject) => socket.write(Buffer.concat([Buffer.from(head), payload.subarray(0, half)]), (err) => (err ? reject(err) : resolve())));
  return {
    sent,
    async finish() {
      socket.write(payload.subarray(half));
      return response;
    },
  };
}

/** A fresh connection (never a pooled keep-alive one) and the answer read from it until the server closes it. */
function rawExchange(port: number): { socket: Socket; response: Promise<RawResponse> } {
  const socket: Socket = connect({ host: '127.0.0.1', port });
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const response = new Promise<RawResponse>((resolve, reject) => {
    socket.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const split = raw.indexOf('\r\n\r\n');
      resolve({ status: Number(raw.slice(9, 12)), head: raw.slice(0, split), body: raw.slice(split + 4) });
    });
    socket.on('error', reject);
  });
  return { socket, response };
}

interface OutboxRow {
  id: string;
  recipient: string;
  status: string;
  attempts: number;
  lease_owner: string | null;
  lease_expires_at: Date | null;
}

describe('graceful shutdown on SIGTERM (the real service process)', () => {
  it('finishes requests in flight, refuses new connections, releases its outbox leases, closes the pool and exits 0 in bounded time', async () => {
    service = await startService(serviceEnv());
    const phoneUser = { username: uniqueName('phone'), phone: `+1555${String(Date.now()).slice(-7)}`, password: PASSWORD };
    expect((await postJson(`${service.url}/auth/v0/sign-up`, phoneUser)).status).toBe(201);

    // An email in flight: the worker claims its row under a lease and its send hangs on the data.
    const stalledName = uniqueName('stalled');
    const stalledEmail = `${stalledName}@example.test`;
    expect((await postJson(`${service.url}/auth/v0/sign-up`, { username: stalledName, email: stalledEmail, password: PASSWORD })).status).toBe(201);
    await waitFor('the SMTP send to hang', () => smtp.stalledCount >= 1);
    if (database !== undefined) {
      const { rows } = await database.db.query<OutboxRow>('SELECT * FROM email_outbox WHERE recipient = $1', [stalledEmail]);
      expect(rows[0]!.lease_owner).not.toBeNull();
    }

    // Two requests in flight: headers and half of each body sent.
    const lateName = uniqueName('late');
    const lateSignUp = startPartialPost(service.port, '/auth/v0/sign-up', { username: lateName, email: `${lateName}@example.test`, password: PASSWORD });
    const lateSignIn = startPartialPost(service.port, '/auth/v0/sign-in', { username: phoneUser.username, password: PASSWORD });
    // Once their bytes are on the wire, a complete request on a third, fresh connection is
    // answered: the server accepted and read the two partial ones before it (a pooled
    // keep-alive connection could overtake them, hence a raw socket).
    await Promise.all([lateSignUp.sent, lateSignIn.sent]);
    const barrier = rawExchange(service.port);
    barrier.socket.write('GET /auth/v0/.well-known/jwks.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    expect((await barrier.response).status).toBe(200);

    const signalled = Date.now();
    service.child.kill('SIGTERM');

    // New connections are refused at once, while the requests in flight keep the process alive.
    let refused = false;
    while (!refused && Date.now() - signalled < REFUSE_WITHIN_MS) {
      refused = await connectionRefused(service.port);
      if (!refused) await new Promise((r) => setTimeout(r, 20));
    }
    expect(refused).toBe(true);
    expect(service.child.exitCode).toBeNull();

    // The requests in flight complete normally.
    const signUpAnswer = await lateSignUp.finish();
    expect(signUpAnswer.status, signUpAnswer.body).toBe(201);
    expect(JSON.parse(signUpAnswer.body).user.username).toBe(lateName);
    const signInAnswer = await lateSignIn.finish();
    expect(signInAnswer.status, signInAnswer.body).toBe(200);
    expect(signInAnswer.head).toMatch(/^set-cookie: refresh_token=[A-Za-z0-9_-]{64};/im);

    // Exit 0, well within the shutdown limit: the hung send holds the worker for at most STOP_WAIT_MS.
    const exit = await exitWithin(service, SHUTDOWN_TIMEOUT_MS);
    expect(exit, service.stderr()).toEqual({ code: 0, signal: null });
    expect(Date.now() - signalled).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
    expect(service.logs.some((l) => l.msg === 'shutting down' && l.signal === 'SIGTERM')).toBe(true);
    expect(service.logs.filter((l) => l.msg === 'unhandled error' || l.msg === 'shutdown failed')).toEqual([]);
    expect(STOP_WAIT_MS).toBeLessThan(SHUTDOWN_TIMEOUT_MS);

    // The lease is released: the row is pending, unleased, its attempt not counted (the send never finished).
    await withDb(async (db) => {
      const { rows } = await db.query<OutboxRow>('SELECT * FROM email_outbox WHERE recipient = $1', [stalledEmail]);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ status: 'pending', attempts: 0, lease_owner: null, lease_expires_at: null });
      const late = await db.query('SELECT 1 FROM users u JOIN email_outbox o ON o.recipient = u.email WHERE u.username = $1', [lateName]);
      expect(late.rows).toHaveLength(1);
    });
    service = undefined;
  });

  it('after the restart, the released row is claimed at once (not after the 60 s lease) and every email is sent exactly once', async () => {
    // Read before the start: on PGlite the running service holds the database.
    const queued = await withDb(async (db) => (await db.query<OutboxRow>('SELECT * FROM email_outbox')).rows);
    expect(queued).toHaveLength(2);
    const expected = queued.map((r) => `<${r.id}@latchkey>`).sort();
    smtp.stalled = false;
    service = await startService(serviceEnv());
    // Well before the 60 s lease would have ended: the worker's first rounds take both rows.
    await waitFor('both emails to arrive', () => smtp.messages.length >= 2);
    expect([...smtp.messageIds()].sort()).toEqual(expected);

    service.child.kill('SIGTERM');
    expect(await exitWithin(service, SHUTDOWN_TIMEOUT_MS)).toEqual({ code: 0, signal: null });
    service = undefined;
    await withDb(async (db) => {
      const { rows: after } = await db.query<OutboxRow>('SELECT * FROM email_outbox');
      expect(after).toHaveLength(2);
      for (const row of after) expect(row).toMatchObject({ status: 'sent', attempts: 1, lease_owner: null });
      expect([...smtp.messageIds()].sort()).toEqual(after.map((r) => `<${r.id}@latchkey>`).sort());
    });
  });
});
