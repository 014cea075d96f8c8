import type { LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/db.js';
import { DEFAULT_CONNECTION_TIMEOUT_MS, openPostgres, QUERY_TIMEOUT_MS, STATEMENT_TIMEOUT_MS } from '../../src/db/pg.js';
import type { TestContext } from '../helpers/context.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { createVerifiedUser, postJson, refresh, refreshCookieOf, signIn, signUp, withBearer } from '../helpers/flows.js';
import { createAppContext, ON_POSTGRES } from './helpers/app-context.js';
import { sha256 } from '../../src/crypto/secrets.js';
import { startTcpProxy, type TcpProxy } from './helpers/tcp-proxy.js';

/**
 * Database outage. The app's pool reaches the shared PostgreSQL server only
 * through a TCP proxy started here, which the test cuts (resets every connection), black-holes
 * (forwards nothing, answers nothing) and restores, without touching the server other test
 * files use. PostgreSQL only: PGlite runs inside the process and has no connection to lose.
 */

/** "Quickly" for a refused or reset connection: no retry loop, no timeout involved. */
const FAST_FAILURE_MS = 2_000;
/**
 * A silent network is noticed by a timeout: the pool's connection timeout for a new connection,
 * the client-side query timeout on an open one (src/db/pg.ts). Plus scheduling slack on a busy
 * 2-core machine.
 */
const SILENT_FAILURE_MS = Math.max(DEFAULT_CONNECTION_TIMEOUT_MS, QUERY_TIMEOUT_MS) + 2_000;

/** How often, and how many times, the test looks for held-back bytes reaching the server after the network heals. */
const DELIVERY_POLL_MS = 20;
const DELIVERY_POLLS = 100;
/** Time for the server to run a statement delivered late, before the test reads the rows. */
const DELIVERY_SETTLE_MS = 500;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The answer and how long it took. */
interface Timed {
  res: LightMyRequestResponse;
  ms: number;
}

async function timed(request: Promise<LightMyRequestResponse>): Promise<Timed> {
  const started = Date.now();
  const res = await request;
  return { res, ms: Date.now() - started };
}

function expectUnavailable({ res, ms }: Timed, withinMs: number, what: string): void {
  expect(res.statusCode, `${what}: ${res.body}`).toBe(503);
  expect(res.json(), what).toEqual({ code: 'service_unavailable', message: expect.any(String) });
  expect(ms, `${what} took ${ms} ms`).toBeLessThan(withinMs);
}

describe.runIf(ON_POSTGRES)('database outage (PostgreSQL only: PGlite runs in-process and has no connection to cut)', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let appDb: Db;
  let ctx: TestContext;
  let user: { username: string; password: string; email: string };

  beforeAll(async () => {
    database = await createTestDatabase();
    const direct = new URL(database.url!);
    proxy = await startTcpProxy({ port: Number(direct.port || 5432) });
    const proxied = new URL(direct);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    appDb = openPostgres({ url: proxied.toString(), poolMax: 10 });
    ctx = await createAppContext({ database, db: appDb, env: { DATABASE_URL: proxied.toString() } });
    user = await createVerifiedUser(ctx);
  });
  afterAll(async () => {
    await ctx?.close();
    await appDb?.close();
    await proxy?.close();
    await database?.drop();
  });

  /** The requests a client makes while the database is away: Bearer, sign-in, refresh, sign-up. */
  async function everyKindOfRequest(session: { accessToken: string; refreshToken: string }): Promise<Record<string, Timed>> {
    const [me, sessions, signInRes, refreshRes, signUpRes] = await Promise.all([
      timed(withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)),
      timed(withBearer(ctx, 'GET', '/auth/v0/sessions', session.accessToken)),
      timed(postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: user.password })),
      timed(refresh(ctx, session.refreshToken)),
      timed(signUp(ctx).then((r) => r.res)),
    ]);
    return { me: me!, sessions: sessions!, signIn: signInRes!, refresh: refreshRes!, signUp: signUpRes! };
  }

  /** Asserts that the app works again, without a restart, with the session's unrotated refresh token. */
  async function expectRecovered(session: { accessToken: string; refreshToken: string; sessionId: string }): Promise<void> {
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(200);
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: user.password })).statusCode).toBe(200);
    expect((await signUp(ctx)).res.statusCode).toBe(201);
    // The refreshes that failed during the outage rotated nothing: the token is still the live one.
    const r = await refresh(ctx, session.refreshToken);
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json().session_id).toBe(session.sessionId);
    session.refreshToken = refreshCookieOf(r).value;
  }

  it('connections cut (reset): every request answers 503 service_unavailable within 2 s, nothing is accepted unchecked; restored, the same requests succeed', async () => {
    const session = await signIn(ctx, { username: user.username, password: user.password });
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(200);
    const usersBefore = await database.db.query('SELECT 1 FROM users');

    proxy.setMode('reset');
    // Twice: first on the pooled connections that just died, then on fresh connections that are refused.
    for (const round of [1, 2]) {
      const answers = await everyKindOfRequest(session);
      for (const [what, t] of Object.entries(answers)) expectUnavailable(t, FAST_FAILURE_MS, `round ${round} ${what}`);
    }
    // The JWKS needs no database: still served.
    expect((await ctx.app.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json' })).statusCode).toBe(200);
    // No 500: every failure was recognised as an outage.
    expect(ctx.logs.filter((l) => l.msg === 'unhandled error')).toEqual([]);
    // Nothing was written: the sign-ups that failed left no user.
    expect((await database.db.query('SELECT 1 FROM users')).rows).toHaveLength(usersBefore.rows.length);

    proxy.setMode('forward');
    await expectRecovered(session);
  });

  it('a silent network (black hole): requests answer 503 within the connection and query timeouts, not hang; restored, they succeed', async () => {
    const session = await signIn(ctx, { username: user.username, password: user.password });
    // Warm the pool so that some requests run on open connections that go silent (query
    // timeout) and others need a new connection that is never answered (connection timeout).
    await Promise.all(Array.from({ length: 4 }, () => withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)));

    proxy.setMode('blackhole');
    const answers = await everyKindOfRequest(session);
    for (const [what, t] of Object.entries(answers)) expectUnavailable(t, SILENT_FAILURE_MS, what);
    expect(ctx.logs.filter((l) => l.msg === 'unhandled error')).toEqual([]);

    proxy.setMode('forward');
    await expectRecovered(session);
  });

  it('a rotation held back by a silent network reaches PostgreSQL after its request answered 503: it does not commit, the token stays the live one', async () => {
    const session = await signIn(ctx, { username: user.username, password: user.password });
    // A first refresh: the service has read the database's clock since, so the next refresh
    // sends its rotation statement at once (src/db/statement-deadline.ts).
    const first = await refresh(ctx, session.refreshToken);
    expect(first.statusCode, first.body).toBe(200);
    const live = refreshCookieOf(first).value;

    proxy.setMode('blackhole');
    const held = await timed(refresh(ctx, live));
    expectUnavailable(held, SILENT_FAILURE_MS, 'refresh held back');
    const forwardedBefore = proxy.forwardedBytes;
    // The network heals: the statement held back flows on and reaches the server now, after the
    // request answered 503 and after the deadline it carries.
    proxy.setMode('forward');
    for (let i = 0; i < DELIVERY_POLLS && proxy.forwardedBytes === forwardedBefore; i++) await sleep(DELIVERY_POLL_MS);
    expect(proxy.forwardedBytes, 'the held-back statement was delivered').toBeGreaterThan(forwardedBefore);
    await sleep(DELIVERY_SETTLE_MS);

    const rows = await database.db.query<{ rotated_at: Date | null }>('SELECT rotated_at FROM refresh_tokens WHERE token_hash = $1', [sha256(live)]);
    expect(rows.rows).toEqual([{ rotated_at: null }]);
    const r = await refresh(ctx, live);
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json().session_id).toBe(session.sessionId);
  });

  it('a statement stuck behind a lock is cancelled by statement_timeout: 503, not a hang; the lock gone, refresh works', async () => {
    const session = await signIn(ctx, { username: user.username, password: user.password });
    // Another client holds the session's refresh-token row (a stuck transaction elsewhere).
    const blocker = new pg.Client({ connectionString: database.url });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM refresh_tokens WHERE session_id = $1 FOR UPDATE', [session.sessionId]);
      const stuck = await timed(refresh(ctx, session.refreshToken));
      expectUnavailable(stuck, STATEMENT_TIMEOUT_MS + 2_000, 'refresh behind a lock');
      expect(stuck.ms).toBeGreaterThanOrEqual(STATEMENT_TIMEOUT_MS - 100);
      expect(ctx.logs.some((l) => l.msg === 'database unavailable' && JSON.stringify(l.err).includes('57014'))).toBe(true);
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    const r = await refresh(ctx, session.refreshToken);
    expect(r.statusCode, r.body).toBe(200);
  });
});

describe.runIf(ON_POSTGRES)('/healthz and /readyz during a database outage (PostgreSQL only; routes)', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let appDb: Db;
  let ctx: TestContext;

  beforeAll(async () => {
    database = await createTestDatabase();
    const direct = new URL(database.url!);
    proxy = await startTcpProxy({ port: Number(direct.port || 5432) });
    const proxied = new URL(direct);
    proxied.port = String(proxy.port);
    appDb = openPostgres({ url: proxied.toString(), poolMax: 10 });
    ctx = await createAppContext({ database, db: appDb, env: { DATABASE_URL: proxied.toString() } });
  });
  afterAll(async () => {
    await ctx?.close();
    await appDb?.close();
    await proxy?.close();
    await database?.drop();
  });

  it('/healthz stays 200 (process alive); /readyz turns 503 service_unavailable while the database is cut, and 200 again once it is back', async () => {
    const probe = (url: string) => ctx.app.inject({ method: 'GET', url });
    expect((await probe('/readyz')).statusCode).toBe(200);

    proxy.setMode('reset');
    const health = await probe('/healthz');
    expect(health.statusCode).toBe(200);
    expect(health.json()).toEqual({ status: 'ok' });
    const ready = await timed(probe('/readyz'));
    expectUnavailable(ready, FAST_FAILURE_MS, '/readyz');

    proxy.setMode('forward');
    expect((await probe('/readyz')).statusCode).toBe(200);
    expect((await probe('/healthz')).statusCode).toBe(200);
  });
});
