import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../../src/crypto/secrets.js';
import { LEASE_MS } from '../../src/modules/mail/outbox.worker.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { PASSWORD, uniqueName } from '../helpers/flows.js';
import { ON_POSTGRES } from './helpers/app-context.js';
import { startFaultSmtpServer, type FaultSmtpServer } from './helpers/fault-smtp.js';
import { startService, stopService, type ServiceProcess } from './helpers/service-process.js';
import { waitUntil } from './helpers/wait.js';

/**
 * Crash safety: the real service on a fresh PostgreSQL database is killed
 * with SIGKILL in the middle of a load of sign-ups and refreshes, then started again on the same
 * database and DATA_DIR. What every client was told before the crash must still hold after it.
 *
 * The SMTP server stalls during the load, so the dead process holds leases on the rows it was
 * sending. Their lease (LEASE_MS, 60 s) is not shortened for the test: after checking that the
 * new process leaves them alone while it runs, the test moves their `lease_expires_at` to the
 * past, which is what 60 s of waiting would do, and checks that they are then claimed and sent.
 *
 * PostgreSQL only: crash safety there rests on PostgreSQL's own durability (a killed client's
 * open transaction is rolled back); PGlite is covered by graceful-shutdown.test.ts.
 */

/** How long the load runs at most before the kill, in milliseconds. */
const LOAD_MS = 2_000;
/** The kill comes after this many answers at the latest (so requests are still in flight then). */
const KILL_AFTER_ANSWERS = 150;
/** No client issues more than this many requests in all (a bound on the load, never reached before the kill). */
const MAX_REQUESTS = 300;
/** Sessions refreshed in a chain during the load. */
const REFRESHED_SESSIONS = 6;
/** Parallel sign-up loops during the load. */
const SIGN_UP_LOOPS = 3;
/** How long the test waits for the restarted service to deliver, in milliseconds. */
const DELIVERY_WAIT_MS = 20_000;

interface Session {
  sessionId: string;
  accessToken: string;
  /** Every refresh token this client was given, oldest first; the last is the one it would present next. */
  tokens: string[];
  /** A refresh was in flight when the process died: its outcome is unknown to the client. */
  inFlightAtKill: boolean;
}

interface SignUpOutcome {
  email: string;
  /** The user id from a 201; undefined when the request was in flight at the kill. */
  userId: string | undefined;
}

describe.runIf(ON_POSTGRES)('SIGKILL under load, then restart (PostgreSQL only: PGlite has its own test in graceful-shutdown.test.ts)', () => {
  let database: TestDatabase;
  let dataDir: string;
  let smtp: FaultSmtpServer;
  let service: ServiceProcess | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = mkdtempSync(path.join(tmpdir(), 'auth-crash-'));
    smtp = await startFaultSmtpServer({ stalled: true });
  });
  afterAll(async () => {
    await stopService(service);
    await smtp?.close();
    await database?.drop();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  const env = (): Record<string, string> => ({
    DATABASE_URL: database.url!,
    DATA_DIR: dataDir,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(smtp.port),
    SMTP_TLS: 'none',
    SMTP_FROM: 'auth@example.test',
    RATE_LIMIT_SIGN_UP_PER_IP: '0',
  });

  const post = (url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${service!.url}${url}`, {
      method: 'POST',
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const refreshWith = (token: string): Promise<Response> => post('/auth/v0/refresh', undefined, { cookie: `refresh_token=${token}` });
  const cookieToken = (res: Response): string => {
    const m = /refresh_token=([A-Za-z0-9_-]{64});/.exec(res.headers.get('set-cookie') ?? '');
    if (m === null) throw new Error(`no refresh cookie: ${res.headers.get('set-cookie')}`);
    return m[1]!;
  };
  const me = (accessToken: string): Promise<Response> => fetch(`${service!.url}/auth/v0/me`, { headers: { authorization: `Bearer ${accessToken}` } });

  /** A phone-only user (no email to verify) signed in once. */
  async function newSession(): Promise<Session> {
    const username = uniqueName('crash');
    const phone = `+1555${String(randomInt(10_000_000)).padStart(7, '0')}`;
    expect((await post('/auth/v0/sign-up', { username, phone, password: PASSWORD })).status).toBe(201);
    const res = await post('/auth/v0/sign-in', { username, password: PASSWORD });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { session_id: string; tokens: { access_token: string } };
    return { sessionId: body.session_id, accessToken: body.tokens.access_token, tokens: [cookieToken(res)], inFlightAtKill: false };
  }

  it('every answer given before the crash holds after the restart, and every queued email is delivered exactly once', async () => {
    service = await startService(env());

    // Before the load: sessions to refresh, sessions ended by logout, a session ended by reuse.
    const chains = await Promise.all(Array.from({ length: REFRESHED_SESSIONS }, () => newSession()));
    const loggedOut = await Promise.all([newSession(), newSession()]);
    for (const s of loggedOut) expect((await post('/auth/v0/logout', undefined, { authorization: `Bearer ${s.accessToken}` })).status).toBe(204);
    const reused = await newSession();
    const r1 = await refreshWith(reused.tokens[0]!);
    expect(r1.status).toBe(200);
    reused.tokens.push(cookieToken(r1));
    const reuse = await refreshWith(reused.tokens[0]!);
    expect(reuse.status).toBe(401);
    expect(((await reuse.json()) as { code: string }).code).toBe('auth.refresh_token_reused');

    // The load: refresh chains and sign-ups in parallel, killed with SIGKILL mid-way.
    let issued = 0;
    let answered = 0;
    let killed = false;
    const killTimer = setTimeout(() => kill(), LOAD_MS);
    const kill = (): void => {
      if (killed) return;
      killed = true;
      clearTimeout(killTimer);
      service!.child.kill('SIGKILL');
    };
    const answeredOne = (): void => {
      answered++;
      if (answered >= KILL_AFTER_ANSWERS) kill();
    };
    const refreshLoop = async (s: Session): Promise<void> => {
      while (!killed && issued < MAX_REQUESTS) {
        issued++;
        let res: Response;
        try {
          res = await refreshWith(s.tokens[s.tokens.length - 1]!);
        } catch {
          s.inFlightAtKill = true;
          return;
        }
        // Every refresh answered before the kill succeeds: one client per chain, one request at a
        // time. The cookie arrives with the headers, which the service sends only after the commit.
        expect(res.status).toBe(200);
        s.tokens.push(cookieToken(res));
        await res.arrayBuffer().catch(() => undefined);
        answeredOne();
      }
    };
    const signUps: SignUpOutcome[] = [];
    const signUpLoop = async (): Promise<void> => {
      while (!killed && issued < MAX_REQUESTS) {
        issued++;
        const username = uniqueName('load');
        const outcome: SignUpOutcome = { email: `${username}@example.test`, userId: undefined };
        signUps.push(outcome);
        let res: Response;
        try {
          res = await post('/auth/v0/sign-up', { username, email: outcome.email, password: PASSWORD });
        } catch {
          return;
        }
        expect(res.status).toBe(201);
        try {
          outcome.userId = ((await res.json()) as { user: { id: string } }).user.id;
        } catch {
          return; // the body was cut by the kill: the outcome stays unknown to this client
        }
        answeredOne();
      }
    };
    await Promise.all([...chains.map(refreshLoop), ...Array.from({ length: SIGN_UP_LOOPS }, signUpLoop)]);
    kill();
    expect(await service.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(issued).toBeLessThanOrEqual(MAX_REQUESTS);
    const confirmed = signUps.filter((s) => s.userId !== undefined);
    expect(confirmed.length).toBeGreaterThan(0);
    expect(chains.some((s) => s.tokens.length > 2)).toBe(true);

    // With the service down: what the database holds.
    const db = database.db;
    // Every 201 sign-up has its user and exactly one outbox row.
    for (const s of confirmed) {
      const { rows } = await db.query('SELECT 1 FROM users u JOIN email_outbox o ON o.recipient = u.email WHERE u.id = $1', [s.userId]);
      expect(rows, s.email).toHaveLength(1);
    }
    // No half sign-up either: users and outbox rows come in pairs, the unanswered ones included.
    const pairs = await db.query<{ users: number; rows: number; unmatched: number }>(
      `SELECT (SELECT count(*)::int FROM users WHERE email IS NOT NULL) AS users,
              (SELECT count(*)::int FROM email_outbox) AS rows,
              (SELECT count(*)::int FROM users u WHERE u.email IS NOT NULL
                 AND (SELECT count(*) FROM email_outbox o WHERE o.recipient = u.email) <> 1) AS unmatched`,
    );
    expect(pairs.rows[0]!.unmatched).toBe(0);
    expect(pairs.rows[0]!.rows).toBe(pairs.rows[0]!.users);
    expect(pairs.rows[0]!.users).toBeGreaterThanOrEqual(confirmed.length);
    expect(pairs.rows[0]!.users).toBeLessThanOrEqual(signUps.length);

    // Each refreshed session has exactly one live token: the last one its client was given, or
    // (when a refresh was in flight at the kill and committed) that token's direct successor.
    const successorCommitted = new Set<string>();
    for (const s of chains) {
      const { rows } = await db.query<{ token_hash: string; parent_hash: string | null }>(
        `SELECT t.token_hash, p.token_hash AS parent_hash FROM refresh_tokens t LEFT JOIN refresh_tokens p ON p.id = t.parent_id
          WHERE t.session_id = $1 AND t.rotated_at IS NULL`,
        [s.sessionId],
      );
      expect(rows, s.sessionId).toHaveLength(1);
      const last = sha256(s.tokens[s.tokens.length - 1]!);
      if (rows[0]!.token_hash !== last) {
        expect(s.inFlightAtKill).toBe(true);
        expect(rows[0]!.parent_hash).toBe(last);
        successorCommitted.add(s.sessionId);
      }
    }
    // The dead process was sending (stalled) when it died: those rows are still leased by it.
    const leased = await db.query<{ id: string; lease_owner: string; lease_expires_at: Date }>(
      `SELECT id, lease_owner, lease_expires_at FROM email_outbox WHERE status = 'pending' AND lease_owner IS NOT NULL`,
    );
    expect(leased.rows.length).toBeGreaterThan(0);
    expect(smtp.stalledCount).toBeGreaterThan(0);
    expect(smtp.messages).toHaveLength(0);

    // Restart on the same database and DATA_DIR (same signing key); SMTP answers again.
    smtp.stalled = false;
    service = await startService(env());

    // Access tokens signed before the crash still verify, and their sessions are checked.
    for (const s of chains) expect((await me(s.accessToken)).status).toBe(200);
    for (const s of [...loggedOut, reused]) expect((await me(s.accessToken)).status).toBe(401);

    // The last token each client got works, unless a refresh it never heard of rotated it: then
    // presenting it is reuse, which (rightly) ends the session.
    for (const s of chains) {
      const res = await refreshWith(s.tokens[s.tokens.length - 1]!);
      if (successorCommitted.has(s.sessionId)) {
        expect(res.status).toBe(401);
        expect(((await res.json()) as { code: string }).code).toBe('auth.refresh_token_reused');
        expect((await me(s.accessToken)).status).toBe(401);
        continue;
      }
      expect(res.status).toBe(200);
      s.tokens.push(cookieToken(res));
    }
    // Revoked sessions stay revoked.
    for (const s of loggedOut) {
      const res = await refreshWith(s.tokens[0]!);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('auth.invalid_refresh_token');
    }
    expect((await refreshWith(reused.tokens[1]!)).status).toBe(401);
    // Rotated tokens are still rejected (as reuse, which ends their sessions).
    for (const s of chains) {
      const res = await refreshWith(s.tokens[0]!);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('auth.refresh_token_reused');
    }
    const live = await db.query('SELECT 1 FROM sessions WHERE revoked_at IS NULL AND id = ANY($1::uuid[])', [chains.map((s) => s.sessionId)]);
    expect(live.rows).toHaveLength(0);

    // The outbox: every row not leased by the dead process is delivered by the new one...
    const leasedIds = new Set(leased.rows.map((r) => r.id));
    const all = (await db.query<{ id: string }>('SELECT id FROM email_outbox')).rows.map((r) => r.id);
    const messageIdOfRow = (id: string): string => `<${id}@latchkey>`;
    await waitUntil('the unleased rows to be delivered', DELIVERY_WAIT_MS, () => all.filter((id) => !leasedIds.has(id)).every((id) => smtp.messageIds().includes(messageIdOfRow(id))));
    // ...while the dead process's rows wait for their lease to end (60 s after the claim).
    const stillLeased = await db.query<{ lease_owner: string }>(`SELECT lease_owner FROM email_outbox WHERE id = ANY($1::uuid[]) AND status = 'pending'`, [[...leasedIds]]);
    expect(stillLeased.rows).toHaveLength(leasedIds.size);
    for (const r of leased.rows) expect(r.lease_expires_at.getTime() - Date.now()).toBeLessThanOrEqual(LEASE_MS);
    // Time passes (simulated): the leases end, and the new process claims and sends those rows.
    await db.query('UPDATE email_outbox SET lease_expires_at = $2 WHERE id = ANY($1::uuid[])', [[...leasedIds], new Date(Date.now() - 1_000)]);
    await waitUntil('the formerly leased rows to be delivered', DELIVERY_WAIT_MS, () => all.every((id) => smtp.messageIds().includes(messageIdOfRow(id))));

    // Exactly once each (the stalled sends were never acknowledged), and every row is sent.
    expect([...smtp.messageIds()].sort()).toEqual(all.map(messageIdOfRow).sort());
    await waitUntil('every row to be recorded as sent', DELIVERY_WAIT_MS, async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM email_outbox WHERE status <> 'sent' OR lease_owner IS NOT NULL`);
      return rows[0]!.n === 0;
    });

    service.child.kill('SIGTERM');
    expect(await service.exited).toEqual({ code: 0, signal: null });
    service = undefined;
  });
});

