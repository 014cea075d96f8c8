import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelExpiredEmails } from '../../src/modules/mail/outbox.repo.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, latestCode, PASSWORD, signIn, signUp, uniqueName } from '../helpers/flows.js';

/**
 * Rate limits that must bound an attacker without locking the owner out (OWASP ASVS 5.0 V6.1.1,
 * docs/security.md "Rate limits"): limits count per client (an IPv4 address, an IPv6 /64), not per
 * identifier or address alone; failed sign-ins are also bounded per account (NIST SP 800-63B-4
 * §3.2.2); resends are bounded per client as well as per address, and a superseded code's queued
 * email is cancelled; change-password counts before its costly checks.
 */

/** Limits small enough to reach in a test; the windows are the production ones. */
const LIMITS = {
  RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '3',
  RATE_LIMIT_SIGN_IN_PER_IP: '6',
  RATE_LIMIT_SIGN_IN_PER_ACCOUNT: '8',
  RATE_LIMIT_VERIFY_PER_IP: '3',
  RATE_LIMIT_RESEND_PER_IP: '3',
};
const FIFTEEN_MINUTES = 15 * 60;
const ONE_HOUR = 60 * 60;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext(LIMITS);
});
afterAll(async () => ctx?.close());

/** A distinct client address per call (light-my-request's remoteAddress: no traffic). */
let next = 1;
const freshIp = () => `203.0.113.${next++}`;
/** A distinct IPv6 /64 per call. */
const freshPrefix = () => `2001:db8:${(next++).toString(16)}:1`;
/** A phone number no other test uses. */
const freshPhone = () => `+1555${String(next++).padStart(7, '0')}`;

function post(url: string, ip: string, payload: Record<string, unknown>): Promise<LightMyRequestResponse> {
  return ctx.app.inject({ method: 'POST', url, remoteAddress: ip, payload });
}

function expectTooMany(res: LightMyRequestResponse, code: string, windowSeconds: number): void {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.json()).toEqual({ code, message: expect.any(String) });
  const retryAfter = Number(res.headers['retry-after']);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(windowSeconds);
}

describe('email verification cannot be blocked by a stranger', () => {
  it("wrong codes from many clients, over many codes, do not stop the owner's latest right code", async () => {
    const { body } = await signUp(ctx);
    const email = body.user.email!;
    let messages = 1;
    // Five codes, each tried wrongly four times (one under its 5 tries) by a fresh client: 20
    // wrong codes for the address, as many as its old per-address limit allowed.
    for (let round = 0; round < 5; round++) {
      const code = await latestCode(ctx, email, messages);
      const wrong = code === '000000' ? '111111' : '000000';
      for (let i = 0; i < 4; i++) expect((await post('/auth/v0/verify-email', freshIp(), { email, code: wrong })).statusCode).toBe(410);
      ctx.clock.advance(61);
      expect((await post('/auth/v0/verify-email/resend', freshIp(), { email })).statusCode).toBe(204);
      messages++;
    }
    const right = await latestCode(ctx, email, messages);
    expect((await post('/auth/v0/verify-email', freshIp(), { email, code: right })).statusCode).toBe(204);
    ctx.clock.advance(FIFTEEN_MINUTES + 1);
  });

  it('a client that keeps guessing is refused (3 failures per 15 minutes here), others are not', async () => {
    const { body } = await signUp(ctx);
    const email = body.user.email!;
    const code = await latestCode(ctx, email);
    const wrong = code === '000000' ? '111111' : '000000';
    const guesser = freshIp();
    for (let i = 0; i < 3; i++) expect((await post('/auth/v0/verify-email', guesser, { email, code: wrong })).statusCode).toBe(410);
    expectTooMany(await post('/auth/v0/verify-email', guesser, { email, code: wrong }), 'auth.verify_email.rate_limited', FIFTEEN_MINUTES);
    // The refused request did not reach the code: it has 3 of its 5 tries, and the owner's right code works.
    expect((await post('/auth/v0/verify-email', freshIp(), { email, code })).statusCode).toBe(204);
    ctx.clock.advance(FIFTEEN_MINUTES + 1);
  });
});

describe('per-IP limits count clients, not addresses', () => {
  it('every address of one IPv6 /64 shares one count; another /64 has its own', async () => {
    const prefix = freshPrefix();
    for (let i = 1; i <= 6; i++) {
      expect((await post('/auth/v0/sign-in', `${prefix}::${i.toString(16)}`, { username: uniqueName('v6'), password: 'wrong password!' })).statusCode).toBe(401);
    }
    expectTooMany(await post('/auth/v0/sign-in', `${prefix}:ffff:ffff:ffff:fff0`, { username: uniqueName('v6'), password: 'wrong password!' }), 'auth.sign_in.too_many_attempts', FIFTEEN_MINUTES);
    expect((await post('/auth/v0/sign-in', `${freshPrefix()}::1`, { username: uniqueName('v6'), password: 'wrong password!' })).statusCode).toBe(401);
    ctx.clock.advance(FIFTEEN_MINUTES + 1);
  });

  it('an IPv4-mapped IPv6 address counts as the IPv4 address', async () => {
    const ip = freshIp();
    for (let i = 0; i < 3; i++) expect((await post('/auth/v0/sign-in', ip, { username: uniqueName('v4'), password: 'wrong password!' })).statusCode).toBe(401);
    for (let i = 0; i < 3; i++) expect((await post('/auth/v0/sign-in', `::ffff:${ip}`, { username: uniqueName('v4'), password: 'wrong password!' })).statusCode).toBe(401);
    expectTooMany(await post('/auth/v0/sign-in', ip, { username: uniqueName('v4'), password: 'wrong password!' }), 'auth.sign_in.too_many_attempts', FIFTEEN_MINUTES);
    ctx.clock.advance(FIFTEEN_MINUTES + 1);
  });
});

describe('failed sign-ins per account (100 per hour by default; 8 here)', () => {
  it('count whichever identifier names the account, from any client, and then refuse even the right password until the hour ends', async () => {
    const user = await createVerifiedUser(ctx, { phone: freshPhone() });
    const phone = (await ctx.db.query<{ phone: string }>('SELECT phone FROM users WHERE username = $1', [user.username])).rows[0]!.phone;
    const names = [{ username: user.username }, { email: user.email }, { phone }];
    // 8 failures, each from a fresh client, spread over the three identifiers (none reaches its own limit of 3).
    for (let i = 0; i < 8; i++) expect((await post('/auth/v0/sign-in', freshIp(), { ...names[i % 3], password: 'wrong password!' })).statusCode).toBe(401);
    expectTooMany(await post('/auth/v0/sign-in', freshIp(), { phone, password: user.password }), 'auth.sign_in.too_many_attempts', ONE_HOUR);
    expectTooMany(await post('/auth/v0/sign-in', freshIp(), { username: user.username, password: user.password }), 'auth.sign_in.too_many_attempts', ONE_HOUR);
    expect(ctx.logs.some((l) => l.event === 'sign_in.locked' && l.reason === 'account' && l.userId === user.id)).toBe(true);
    // A window, not a lock for good: an hour later the right password works.
    ctx.clock.advance(ONE_HOUR + 1);
    expect((await post('/auth/v0/sign-in', freshIp(), { username: user.username, password: user.password })).statusCode).toBe(200);
  });

  it('unknown identifiers and successful sign-ins do not count against an account', async () => {
    const user = await createVerifiedUser(ctx);
    for (let i = 0; i < 12; i++) expect((await post('/auth/v0/sign-in', freshIp(), { username: user.username, password: user.password })).statusCode).toBe(200);
    for (let i = 0; i < 7; i++) expect((await post('/auth/v0/sign-in', freshIp(), { username: user.username, password: 'wrong password!' })).statusCode).toBe(401);
    expect((await post('/auth/v0/sign-in', freshIp(), { username: user.username, password: user.password })).statusCode).toBe(200);
    ctx.clock.advance(ONE_HOUR + 1);
  });
});

describe('resend is bounded per client as well as per address', () => {
  it('a client over its resends (3 per hour here) is refused for any address; others are not, and the address keeps its own resend', async () => {
    const ip = freshIp();
    const addresses = await Promise.all(Array.from({ length: 4 }, async () => (await signUp(ctx)).body.user.email!));
    for (const email of addresses.slice(0, 3)) expect((await post('/auth/v0/verify-email/resend', ip, { email })).statusCode).toBe(204);
    expectTooMany(await post('/auth/v0/verify-email/resend', ip, { email: addresses[3] }), 'auth.resend_verification.too_many_attempts', ONE_HOUR);
    expectTooMany(await post('/auth/v0/verify-email/resend', ip, { email: `${uniqueName()}@example.test` }), 'auth.resend_verification.too_many_attempts', ONE_HOUR);
    // The refused request did not use up the fourth address's resend.
    expect((await post('/auth/v0/verify-email/resend', freshIp(), { email: addresses[3] })).statusCode).toBe(204);
    ctx.clock.advance(ONE_HOUR + 1);
  });
});

describe('a superseded code is never sent after the newer one', () => {
  it("resend cancels the older code's email still waiting in the outbox, and drops the code of a dead one", async () => {
    const paused = await createTestContext({}, { startOutboxWorker: false });
    try {
      const { body } = await signUp(paused);
      const email = body.user.email!;
      const rows = () =>
        paused.db.query<{ status: string; has_code: boolean; last_error: string | null }>(
          `SELECT status, payload ? 'code' AS has_code, last_error FROM email_outbox WHERE recipient = $1 ORDER BY created_at, id`,
          [email],
        );
      expect((await rows()).rows.map((r) => r.status)).toEqual(['pending']);
      paused.clock.advance(61);
      expect((await paused.app.inject({ method: 'POST', url: '/auth/v0/verify-email/resend', payload: { email } })).statusCode).toBe(204);
      const after = (await rows()).rows;
      expect(after.map((r) => [r.status, r.has_code])).toEqual([
        ['cancelled', false],
        ['pending', true],
      ]);
      expect(after[0]!.last_error).toMatch(/superseded/);
      // A dead row of the newer code keeps it (for `outbox retry`) until a newer code supersedes it.
      await paused.db.query(`UPDATE email_outbox SET status = 'dead' WHERE recipient = $1 AND status = 'pending'`, [email]);
      paused.clock.advance(61);
      expect((await paused.app.inject({ method: 'POST', url: '/auth/v0/verify-email/resend', payload: { email } })).statusCode).toBe(204);
      expect((await rows()).rows.map((r) => [r.status, r.has_code])).toEqual([
        ['cancelled', false],
        ['dead', false],
        ['pending', true],
      ]);
      // A row being sent at that moment (leased) finishes its attempt; should it fail, it is not
      // retried after the newer email: it expired at the resend, and the worker cancels it.
      const now = () => paused.clock.now();
      await paused.db.query(`UPDATE email_outbox SET lease_owner = 'w', lease_expires_at = $2 WHERE recipient = $1 AND status = 'pending'`, [
        email,
        new Date(now().getTime() + 120_000),
      ]);
      paused.clock.advance(61);
      expect((await paused.app.inject({ method: 'POST', url: '/auth/v0/verify-email/resend', payload: { email } })).statusCode).toBe(204);
      const leased = await paused.db.query<{ status: string; has_code: boolean; expired: boolean }>(
        `SELECT status, payload ? 'code' AS has_code, expires_at <= $2 AS expired FROM email_outbox WHERE recipient = $1 AND lease_owner = 'w'`,
        [email, now()],
      );
      expect(leased.rows).toEqual([{ status: 'pending', has_code: true, expired: true }]);
      // The attempt fails: the lease ends and the row is pending again; the next round cancels it.
      await paused.db.query(`UPDATE email_outbox SET lease_owner = NULL, lease_expires_at = NULL WHERE recipient = $1 AND lease_owner = 'w'`, [email]);
      expect(await cancelExpiredEmails(paused.db, now())).toBe(1);
      expect((await rows()).rows.map((r) => [r.status, r.has_code])).toEqual([
        ['cancelled', false],
        ['dead', false],
        ['cancelled', false],
        ['pending', true],
      ]);
    } finally {
      await paused.close();
    }
  });
});

describe('change-password is rate-limited before its password-strength check', () => {
  it('every unsuccessful attempt counts (3 per 15 minutes here), refused new passwords too, and the limit answers before the policy runs', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: user.password });
    const change = (current: string, next: string) =>
      ctx.app.inject({ method: 'POST', url: '/auth/v0/change-password', headers: { authorization: `Bearer ${accessToken}` }, payload: { current_password: current, new_password: next } });
    for (let i = 0; i < 3; i++) expect((await change(user.password, 'password')).statusCode).toBe(400);
    // A fourth attempt is refused by the limit, not by the policy it never reaches.
    expectTooMany(await change(user.password, 'password'), 'auth.change_password.too_many_attempts', FIFTEEN_MINUTES);
    ctx.clock.advance(FIFTEEN_MINUTES + 1);
    expect((await change(user.password, `${PASSWORD} again`)).statusCode).toBe(204);
  });
});
