import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { buildApp, createLogger } from '../../src/app.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, latestCode, PASSWORD, signIn, signUp, uniqueName } from '../helpers/flows.js';

/** Limits small enough to reach in a test; windows are the production ones (15 min, 1 h). */
const LIMITS = {
  RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '3',
  RATE_LIMIT_SIGN_IN_PER_IP: '6',
  RATE_LIMIT_SIGN_IN_PER_ACCOUNT: '8',
  RATE_LIMIT_VERIFY_PER_IP: '3',
  RATE_LIMIT_RESEND_PER_IP: '3',
};

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext(LIMITS);
});
afterAll(async () => ctx.close());

/** A distinct client address per test, so per-IP counters do not leak between tests (light-my-request's remoteAddress, no traffic). */
let nextIp = 1;
const freshIp = () => `198.51.100.${nextIp++}`;

function signInFrom(ip: string, body: Record<string, unknown>, app = ctx.app): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'POST', url: '/auth/v0/sign-in', remoteAddress: ip, headers: { 'content-type': 'application/json' }, payload: body });
}

function expectTooMany(res: LightMyRequestResponse, code: string, windowSeconds: number): void {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.json()).toEqual({ code, message: expect.any(String) });
  const retryAfter = Number(res.headers['retry-after']);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(windowSeconds);
}

describe('failed sign-ins per identifier from one client (10 per 15 min by default; 3 here)', () => {
  it('locks the identifier for that client after the limit, even for the right password, and unlocks when the window ends', async () => {
    const user = await createVerifiedUser(ctx);
    const ip = freshIp();
    for (let i = 0; i < 3; i++) expect((await signInFrom(ip, { username: user.username, password: 'wrong password!' })).statusCode).toBe(401);
    expectTooMany(await signInFrom(ip, { username: user.username, password: user.password }), 'auth.sign_in.too_many_attempts', 900);
    // Only for the window: 15 minutes later the right password works from there too.
    ctx.clock.advance(15 * 60 + 1);
    expect((await signInFrom(ip, { username: user.username, password: user.password })).statusCode).toBe(200);
  });

  it("a stranger's failures do not lock the owner out: the owner's client signs in with the right password", async () => {
    const user = await createVerifiedUser(ctx);
    const stranger = freshIp();
    for (let i = 0; i < 3; i++) expect((await signInFrom(stranger, { username: user.username, password: 'wrong password!' })).statusCode).toBe(401);
    expectTooMany(await signInFrom(stranger, { username: user.username, password: 'wrong password!' }), 'auth.sign_in.too_many_attempts', 900);
    expect((await signInFrom(freshIp(), { username: user.username, password: user.password })).statusCode).toBe(200);
    ctx.clock.advance(15 * 60 + 1);
  });

  it('a lock on an unknown identifier looks exactly like a lock on a real one', async () => {
    const real = await createVerifiedUser(ctx);
    const ghost = uniqueName('ghost');
    const ip = freshIp();
    for (let i = 0; i < 3; i++) {
      const a = await signInFrom(ip, { username: real.username, password: 'wrong password!' });
      const b = await signInFrom(ip, { username: ghost, password: 'wrong password!' });
      expect([a.statusCode, b.statusCode]).toEqual([401, 401]);
      expect(a.json()).toEqual(b.json());
    }
    const lockedReal = await signInFrom(ip, { username: real.username, password: 'wrong password!' });
    const lockedGhost = await signInFrom(ip, { username: ghost, password: 'wrong password!' });
    expectTooMany(lockedReal, 'auth.sign_in.too_many_attempts', 900);
    expectTooMany(lockedGhost, 'auth.sign_in.too_many_attempts', 900);
    expect(lockedReal.json()).toEqual(lockedGhost.json());
    ctx.clock.advance(15 * 60 + 1);
  });

  it('successful sign-ins do not count, and the lock is per identifier (email and username are separate subjects)', async () => {
    const user = await createVerifiedUser(ctx);
    const other = await createVerifiedUser(ctx);
    const ip = freshIp();
    for (let i = 0; i < 5; i++) expect((await signInFrom(ip, { username: user.username, password: user.password })).statusCode).toBe(200);
    for (let i = 0; i < 3; i++) expect((await signInFrom(ip, { email: user.email, password: 'wrong password!' })).statusCode).toBe(401);
    expectTooMany(await signInFrom(ip, { email: user.email, password: user.password }), 'auth.sign_in.too_many_attempts', 900);
    expect((await signInFrom(ip, { username: user.username, password: user.password })).statusCode).toBe(200);
    expect((await signInFrom(ip, { username: other.username, password: other.password })).statusCode).toBe(200);
    ctx.clock.advance(15 * 60 + 1);
  });

  it('a right password takes back the count of every identifier it named and of the IP (one statement counts them, the session statement forgives them)', async () => {
    const user = await createVerifiedUser(ctx);
    const ip = freshIp();
    const both = { username: user.username, email: user.email };
    for (let i = 0; i < 2; i++) expect((await signInFrom(ip, { ...both, password: 'wrong password!' })).statusCode).toBe(401);
    // Counted to 3 (the limit) and taken back to 2, for the username, the email and the IP alike.
    expect((await signInFrom(ip, { ...both, password: user.password })).statusCode).toBe(200);
    expect((await signInFrom(ip, { email: user.email, password: 'wrong password!' })).statusCode).toBe(401);
    expect((await signInFrom(ip, { username: user.username, password: 'wrong password!' })).statusCode).toBe(401);
    // Both identifiers are now at their limit from this client: the next attempt by either is refused, even right.
    expectTooMany(await signInFrom(ip, { email: user.email, password: user.password }), 'auth.sign_in.too_many_attempts', 900);
    // The IP counted 2 failures + 1 taken back + 2 failures + 1 refused = 5 of its 6: one more
    // wrong guess with a fresh name passes the IP limit, a second does not.
    expect((await signInFrom(ip, { username: uniqueName('fresh'), password: 'wrong password!' })).statusCode).toBe(401);
    expectTooMany(await signInFrom(ip, { username: uniqueName('fresh'), password: 'wrong password!' }), 'auth.sign_in.too_many_attempts', 900);
    ctx.clock.advance(15 * 60 + 1);
  });

  it('parallel wrong guesses never get more than the limit past the counter', async () => {
    const user = await createVerifiedUser(ctx);
    const ip = freshIp();
    const results = await Promise.all(Array.from({ length: 12 }, () => signInFrom(ip, { username: user.username, password: 'wrong password!' })));
    const statuses = results.map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 401)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(9);
    ctx.clock.advance(15 * 60 + 1);
  });
});

describe('failed sign-ins per client IP (50 per 15 min by default; 6 here)', () => {
  it('locks the IP across identifiers; other IPs are unaffected', async () => {
    const ip = freshIp();
    for (let i = 0; i < 6; i++) expect((await signInFrom(ip, { username: uniqueName('spray'), password: 'wrong password!' })).statusCode).toBe(401);
    const user = await createVerifiedUser(ctx);
    expectTooMany(await signInFrom(ip, { username: user.username, password: user.password }), 'auth.sign_in.too_many_attempts', 900);
    expect((await signInFrom(freshIp(), { username: user.username, password: user.password })).statusCode).toBe(200);
    const locked = ctx.logs.filter((l) => l.event === 'sign_in.locked' && l.ip === ip);
    expect(locked.length).toBeGreaterThan(0);
    expect(locked[0]!.level).toBe(40);
    ctx.clock.advance(15 * 60 + 1);
  });

  it('X-Forwarded-For is ignored without TRUST_PROXY: a client cannot pick a fresh address per request', async () => {
    const ip = freshIp();
    for (let i = 0; i < 6; i++) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/auth/v0/sign-in',
        remoteAddress: ip,
        headers: { 'content-type': 'application/json', 'x-forwarded-for': `203.0.113.${i}` },
        payload: { username: uniqueName('xff'), password: 'wrong password!' },
      });
      expect(res.statusCode).toBe(401);
    }
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/auth/v0/sign-in',
      remoteAddress: ip,
      headers: { 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.200' },
      payload: { username: uniqueName('xff'), password: 'wrong password!' },
    });
    expectTooMany(res, 'auth.sign_in.too_many_attempts', 900);
    ctx.clock.advance(15 * 60 + 1);
  });
});

describe('wrong current passwords at change-password (same limit as per identifier; 3 here)', () => {
  it('a stolen access token does not give unlimited guesses at the current password', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: user.password });
    const change = (current: string) =>
      ctx.app.inject({ method: 'POST', url: '/auth/v0/change-password', headers: { authorization: `Bearer ${accessToken}` }, payload: { current_password: current, new_password: 'a fresh passphrase 2026' } });
    for (let i = 0; i < 3; i++) expect((await change('not the password')).statusCode).toBe(401);
    expectTooMany(await change(user.password), 'auth.change_password.too_many_attempts', 900);
    ctx.clock.advance(15 * 60 + 1);
    expect((await change(user.password)).statusCode).toBe(204);
  });
});

describe('an IP over its limit does not lock the identifiers it names', () => {
  it('requests refused for their IP do not count against the accounts they name', async () => {
    const ip = freshIp();
    for (let i = 0; i < 6; i++) expect((await signInFrom(ip, { username: uniqueName('spray'), password: 'wrong password!' })).statusCode).toBe(401);
    const victim = await createVerifiedUser(ctx);
    for (let i = 0; i < 5; i++) expectTooMany(await signInFrom(ip, { username: victim.username, password: 'wrong password!' }), 'auth.sign_in.too_many_attempts', 900);
    expect((await signInFrom(freshIp(), { username: victim.username, password: victim.password })).statusCode).toBe(200);
    ctx.clock.advance(15 * 60 + 1);
  });
});

describe('limits live in the database', () => {
  it('two service instances on one database share the counters', async () => {
    const second = await buildApp({ config: ctx.config, db: ctx.db, clock: ctx.clock, logger: createLogger('silent'), startOutboxWorker: false });
    try {
      const user = await createVerifiedUser(ctx);
      const ip = freshIp();
      for (let i = 0; i < 3; i++) {
        const app = i % 2 === 0 ? ctx.app : second;
        expect((await signInFrom(ip, { username: user.username, password: 'wrong password!' }, app)).statusCode).toBe(401);
      }
      expectTooMany(await signInFrom(ip, { username: user.username, password: user.password }, second), 'auth.sign_in.too_many_attempts', 900);
    } finally {
      await second.close();
      ctx.clock.advance(15 * 60 + 1);
    }
  });
});

describe('sign-ups per client IP (20 per hour by default; 2 here)', () => {
  it('refuses the third sign-up from one IP with 429 and stores nothing', async () => {
    // Its own context: every other test here signs users up from one address.
    const own = await createTestContext({ RATE_LIMIT_SIGN_UP_PER_IP: '2' });
    try {
      await signUpLimit(own);
    } finally {
      await own.close();
    }
  });
});

async function signUpLimit(ctx: TestContext): Promise<void> {
  {
    const ip = freshIp();
    const attempt = (username: string) =>
      ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', remoteAddress: ip, payload: { username, email: `${username}@example.test`, password: PASSWORD } });
    expect((await attempt(uniqueName())).statusCode).toBe(201);
    expect((await attempt(uniqueName())).statusCode).toBe(201);
    const third = uniqueName();
    expectTooMany(await attempt(third), 'auth.sign_up.too_many_attempts', 3600);
    expect((await ctx.db.query('SELECT 1 FROM users WHERE username = $1', [third])).rows).toHaveLength(0);
    const other = await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', remoteAddress: freshIp(), payload: { username: uniqueName(), phone: '+15550009999', password: PASSWORD } });
    expect(other.statusCode).toBe(201);
    ctx.clock.advance(60 * 60 + 1);
    expect((await attempt(uniqueName())).statusCode).toBe(201);
  }
}

describe('TRUST_PROXY=true', () => {
  it('honours X-Forwarded-For: the client address behind the proxy is limited and recorded on the session', async () => {
    const proxied = await createTestContext({ ...LIMITS, TRUST_PROXY: 'true' });
    try {
      const viaProxy = (client: string, body: Record<string, unknown>) =>
        proxied.app.inject({ method: 'POST', url: '/auth/v0/sign-in', remoteAddress: '10.1.1.1', headers: { 'x-forwarded-for': client }, payload: body });
      for (let i = 0; i < 6; i++) expect((await viaProxy('203.0.113.7', { username: uniqueName('xff'), password: 'wrong password!' })).statusCode).toBe(401);
      expectTooMany(await viaProxy('203.0.113.7', { username: uniqueName('xff'), password: 'wrong password!' }), 'auth.sign_in.too_many_attempts', 900);
      // Another client behind the same proxy has its own budget.
      const user = await createVerifiedUser(proxied);
      const ok = await viaProxy('203.0.113.8', { username: user.username, password: user.password });
      expect(ok.statusCode).toBe(200);
      const sessions = await proxied.app.inject({ method: 'GET', url: '/auth/v0/sessions', headers: { authorization: `Bearer ${ok.json().tokens.access_token}` } });
      expect(sessions.json().sessions[0].ip).toBe('203.0.113.8');
    } finally {
      await proxied.close();
    }
  });
});
