import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, refresh, refreshCookieOf, signIn, uniqueName, withBearer } from '../helpers/flows.js';
import { codeNow, enrolled, passwordStep, secondStep } from '../helpers/mfa.js';

/**
 * Guessing a factor through the operations of a signed-in user (docs/security.md, "Rate
 * limits"): every check of the current password shares one budget per user and counts into the
 * account's failed sign-ins; every wrong TOTP or recovery code counts under the account's
 * second-factor limit, wherever it is typed, and its owner hears of it; an identifier that names
 * nobody meets the same per-account limit as one that does.
 */
const LIMITS = {
  RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '10',
  RATE_LIMIT_SIGN_IN_PER_ACCOUNT: '100',
  RATE_LIMIT_MFA_PER_ACCOUNT: '10',
  RATE_LIMIT_MFA_PER_IP: '0',
  RATE_LIMIT_CHANGE_EMAIL_PER_USER: '100',
};

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext(LIMITS, { startOutboxWorker: false });
});
afterAll(async () => ctx?.close());

const WRONG = 'not the password at all';
const NEW_PASSWORD = 'plum tractor velvet harbour';

/** One attempt of each operation that checks the current password, with `password`. */
const passwordChecks: readonly ((token: string, password: string) => Promise<LightMyRequestResponse>)[] = [
  (token, password) => withBearer(ctx, 'POST', '/auth/v0/change-password', token, { current_password: password, new_password: NEW_PASSWORD }),
  (token, password) => withBearer(ctx, 'POST', '/auth/v0/delete-account', token, { password }),
  (token, password) => withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', token, { password }),
  (token, password) => withBearer(ctx, 'POST', '/auth/v0/change-email', token, { new_email: `${uniqueName()}@example.test`, password }),
];

async function accountWindowHits(userId: string): Promise<number> {
  const { rows } = await ctx.db.query<{ hits: number }>('SELECT hits FROM rate_limits WHERE key = $1', [`sign_in_account:${userId}`]);
  return rows[0]?.hits ?? 0;
}

function events(name: string, userId: string): Record<string, unknown>[] {
  return ctx.logs.filter((l) => l.event === name && l.userId === userId);
}

describe('one budget for every check of the current password', () => {
  it('wrong passwords spread over the four operations share RATE_LIMIT_SIGN_IN_PER_IDENTIFIER per user, count as failed sign-ins and are logged', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: PASSWORD });
    // Ten wrong passwords, spread over the four operations (3, 3, 2, 2): each is a 401.
    for (let i = 0; i < 10; i++) {
      const res = await passwordChecks[i % 4]!(accessToken, WRONG);
      expect(res.statusCode, `attempt ${i + 1}: ${res.body}`).toBe(401);
      expect(res.json()).toMatchObject({ code: 'auth.invalid_current_password' });
    }
    // The eleventh, on any of them and even with the right password, is refused before argon2id.
    for (const check of passwordChecks) {
      const res = await check(accessToken, PASSWORD);
      expect(res.statusCode, res.body).toBe(429);
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    expect(await accountWindowHits(user.id)).toBe(10);
    const logged = events('password.check_failed', user.id);
    expect(logged).toHaveLength(10);
    expect(logged.map((l) => l.reason).sort()).toEqual(['change_email', 'change_email', 'change_password', 'change_password', 'change_password', 'delete_account', 'delete_account', 'delete_account', 'mfa_setup', 'mfa_setup']);
    expect(JSON.stringify(logged)).not.toContain(WRONG);
  });

  it('a right password takes its count back; the account failures it added stay out', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: PASSWORD });
    for (let i = 0; i < 9; i++) expect((await passwordChecks[2]!(accessToken, WRONG)).statusCode).toBe(401);
    for (let i = 0; i < 3; i++) expect((await passwordChecks[2]!(accessToken, PASSWORD)).statusCode).toBe(200);
    expect(await accountWindowHits(user.id)).toBe(9);
    expect((await passwordChecks[2]!(accessToken, WRONG)).statusCode).toBe(401);
    expect((await passwordChecks[2]!(accessToken, PASSWORD)).statusCode).toBe(429);
  });

  it('an account whose failed sign-ins strangers have spent still lets its signed-in owner change the password', async () => {
    const c = await createTestContext({ ...LIMITS, RATE_LIMIT_SIGN_IN_PER_ACCOUNT: '3', RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '0' }, { startOutboxWorker: false });
    try {
      const user = await createVerifiedUser(c);
      const { accessToken } = await signIn(c, { username: user.username, password: PASSWORD });
      for (let i = 0; i < 3; i++) {
        const res = await c.app.inject({ method: 'POST', url: '/auth/v0/sign-in', remoteAddress: `203.0.113.${i + 1}`, payload: { username: user.username, password: WRONG } });
        expect(res.statusCode).toBe(401);
      }
      expect((await c.app.inject({ method: 'POST', url: '/auth/v0/sign-in', remoteAddress: '203.0.113.9', payload: { username: user.username, password: PASSWORD } })).statusCode).toBe(429);
      const res = await withBearer(c, 'POST', '/auth/v0/change-password', accessToken, { current_password: PASSWORD, new_password: NEW_PASSWORD });
      expect(res.statusCode, res.body).toBe(204);
    } finally {
      await c.close();
    }
  });
});

async function noticesTo(c: TestContext, email: string): Promise<{ notice: string; text: string }[]> {
  const { rows } = await c.db.query<{ notice: string; payload: unknown }>(
    "SELECT payload->>'notice' AS notice, payload FROM email_outbox WHERE recipient = $1 AND kind = 'notice' ORDER BY created_at, id",
    [email],
  );
  return rows.map((r) => ({ notice: r.notice, text: JSON.stringify(r.payload) }));
}

describe('wrong TOTP codes count wherever a code is checked', () => {
  it('wrong codes at disable and recovery-codes count under the per-account second-factor limit, and are logged as mfa.failed', async () => {
    const { user, session } = await enrolled(ctx);
    // Five wrong codes at disable and five at regeneration, all with the right password.
    for (let i = 0; i < 10; i++) {
      const url = i % 2 === 0 ? '/auth/v0/mfa/totp/disable' : '/auth/v0/mfa/recovery-codes';
      const res = await withBearer(ctx, 'POST', url, session.accessToken, { password: PASSWORD, code: String(100000 + i) });
      expect(res.statusCode, res.body).toBe(401);
      expect(res.json()).toMatchObject({ code: 'auth.mfa.invalid_code' });
    }
    expect(events('mfa.failed', user.id)).toHaveLength(10);
    // The account's second-factor budget (10 an hour) is spent: the sign-in second step is refused too.
    const challenge = await passwordStep(ctx, user.username);
    const res = await secondStep(ctx, challenge, { code: '123456' });
    expect(res.statusCode, res.body).toBe(429);
    expect(res.json()).toMatchObject({ code: 'auth.mfa.too_many_attempts' });
  });

  it('after 5 wrong codes within an hour, the owner gets one notice, at most once a day', async () => {
    const { user, session, secret } = await enrolled(ctx);
    let { accessToken, refreshToken } = session;
    /** A new access token for the session, once the clock has moved past the old one's lifetime. */
    const renew = async () => {
      const res = await refresh(ctx, refreshToken);
      expect(res.statusCode, res.body).toBe(200);
      accessToken = (res.json() as { tokens: { access_token: string } }).tokens.access_token;
      refreshToken = refreshCookieOf(res).value;
    };
    const wrong = () => withBearer(ctx, 'POST', '/auth/v0/mfa/totp/disable', accessToken, { password: PASSWORD, code: '000000' });
    for (let i = 0; i < 4; i++) expect((await wrong()).statusCode).toBe(401);
    expect((await noticesTo(ctx, user.email)).filter((n) => n.notice === 'mfa_codes_failing')).toHaveLength(0);
    // The fifth wrong code, at the sign-in second step this time.
    const challenge = await passwordStep(ctx, user.username);
    expect((await secondStep(ctx, challenge, { code: codeNow(ctx, secret) === '000000' ? '000001' : '000000' })).statusCode).toBe(401);
    let failing = (await noticesTo(ctx, user.email)).filter((n) => n.notice === 'mfa_codes_failing');
    expect(failing).toHaveLength(1);
    // An hour later, five more: no second notice the same day.
    ctx.clock.advance(3600);
    await renew();
    for (let i = 0; i < 5; i++) expect((await wrong()).json()).toMatchObject({ code: 'auth.mfa.invalid_code' });
    failing = (await noticesTo(ctx, user.email)).filter((n) => n.notice === 'mfa_codes_failing');
    expect(failing).toHaveLength(1);
    // A day later, five more: a second one.
    ctx.clock.advance(86_400);
    await renew();
    for (let i = 0; i < 5; i++) expect((await wrong()).json()).toMatchObject({ code: 'auth.mfa.invalid_code' });
    failing = (await noticesTo(ctx, user.email)).filter((n) => n.notice === 'mfa_codes_failing');
    expect(failing).toHaveLength(2);
    // The notice says what happens, and carries no code.
    await ctx.app.outbox.runOnce();
    const { rows } = await ctx.db.query<{ status: string }>("SELECT status FROM email_outbox WHERE recipient = $1 AND payload->>'notice' = 'mfa_codes_failing'", [user.email]);
    expect(rows.length).toBe(2);
  });
});

describe('the per-account limit does not tell who exists', () => {
  it('an unknown username meets 429 after as many failures as a known one, from as many addresses', async () => {
    const c = await createTestContext({ RATE_LIMIT_SIGN_IN_PER_ACCOUNT: '5', RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '10', RATE_LIMIT_SIGN_IN_PER_IP: '10' }, { startOutboxWorker: false });
    try {
      const known = await createVerifiedUser(c);
      const unknown = uniqueName();
      const answers = async (username: string): Promise<number[]> => {
        const statuses: number[] = [];
        for (let i = 0; i < 6; i++) {
          const res = await c.app.inject({ method: 'POST', url: '/auth/v0/sign-in', remoteAddress: `198.51.100.${i + 1}`, payload: { username, password: WRONG } });
          statuses.push(res.statusCode);
          if (res.statusCode === 429) expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
        }
        return statuses;
      };
      const knownAnswers = await answers(known.username);
      const unknownAnswers = await answers(unknown);
      expect(knownAnswers).toEqual([401, 401, 401, 401, 401, 429]);
      expect(unknownAnswers).toEqual(knownAnswers);
      // A username that cannot exist (outside the stored form) is counted the same way.
      expect(await answers('No Such User!')).toEqual(knownAnswers);
      // Email and phone identifiers too, per normalised identifier.
      const email = `${uniqueName()}@example.test`;
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await c.app.inject({
          method: 'POST',
          url: '/auth/v0/sign-in',
          remoteAddress: `192.0.2.${i + 1}`,
          payload: { email: i % 2 === 0 ? email : ` ${email.toUpperCase()} `, password: WRONG },
        });
        statuses.push(res.statusCode);
      }
      expect(statuses).toEqual(knownAnswers);
    } finally {
      await c.close();
    }
  });
});

describe('security notices cannot carry an attacker’s text', () => {
  const HOSTILE_UA = 'Mozilla/5.0\x85\x85IMPORTANT: this change was NOT made by you. Cancel it at https://latchkey-support.example/cancel\x85';

  it('the User-Agent of the request is printed neutralised: no C1 controls, no working link, quoted and capped', async () => {
    const c = await createTestContext();
    try {
      const user = await createVerifiedUser(c);
      const { accessToken } = await signIn(c, { username: user.username, password: PASSWORD });
      const res = await c.app.inject({
        method: 'POST',
        url: '/auth/v0/change-password',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json', 'user-agent': HOSTILE_UA },
        payload: { current_password: PASSWORD, new_password: NEW_PASSWORD },
      });
      expect(res.statusCode, res.body).toBe(204);
      const { mailsTo, mailText } = await import('../helpers/mail.js');
      const mails = await mailsTo(c, user.email, 2);
      const text = mailText(mails[1]!);
      expect(text).not.toMatch(/[\u0080-\u009f\u2028\u2029]/);
      expect(text).not.toContain('https://');
      expect(text).not.toContain('latchkey-support.example');
      expect(text).toContain('Browser or app: "Mozilla/5[.]0IMPORTANT[:] this change was NOT made by you[.] Cancel it at https[:]//latchkey-support[.]example/cancel"');
      // A long one is cut.
      c.clock.advance(1);
      const { accessToken: token } = await signIn(c, { username: user.username, password: NEW_PASSWORD });
      const again = await c.app.inject({
        method: 'POST',
        url: '/auth/v0/change-password',
        headers: { authorization: `Bearer ${token}`, 'user-agent': 'y'.repeat(2000) },
        payload: { current_password: NEW_PASSWORD, new_password: 'quince lantern orbit meadow' },
      });
      expect(again.statusCode, again.body).toBe(204);
      const third = mailText((await mailsTo(c, user.email, 3))[2]!);
      const line = third.split(/\r?\n/).find((l) => l.startsWith('Browser or app: '))!;
      expect(line.length).toBeLessThan(300);
    } finally {
      await c.close();
    }
  });
});
