import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, expectError, PASSWORD, postJson, refresh, setCookies, signIn, signUp, uniqueName, withBearer } from '../helpers/flows.js';
import { mailsTo, mailText } from '../helpers/mail.js';

/**
 * POST /auth/v0/delete-account (docs/api.md#delete-account): every status and error code, and the
 * effects: the user and everything it owns gone in one transaction, its tokens dead at once, its
 * identifiers free, its queued emails cancelled, an account_deleted notice delivered.
 */
let ctx: TestContext;
beforeAll(async () => {
  // The worker is driven by runOnce only, so queued emails stay queued until a test sends them.
  ctx = await createTestContext({}, { startOutboxWorker: false });
});
afterAll(async () => ctx.close());

function deleteAccount(token: string, body: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return ctx.app.inject({
    method: 'POST',
    url: '/auth/v0/delete-account',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}


async function rowsOf(userId: string): Promise<Record<string, number>> {
  const { rows } = await ctx.db.query<Record<string, number>>(
    `SELECT (SELECT count(*) FROM users WHERE id = $1)::int AS users,
            (SELECT count(*) FROM devices WHERE user_id = $1)::int AS devices,
            (SELECT count(*) FROM sessions WHERE user_id = $1)::int AS sessions,
            (SELECT count(*) FROM verification_codes WHERE user_id = $1)::int AS codes`,
    [userId],
  );
  return rows[0]!;
}

async function refreshTokensOf(sessionIds: string[]): Promise<number> {
  const { rows } = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM refresh_tokens WHERE session_id = ANY($1::uuid[])', [sessionIds]);
  return rows[0]!.n;
}

describe('delete-account succeeds', () => {
  it('204, the clearing cookie, every row of the user gone, its access and refresh tokens 401 at once, other users untouched', async () => {
    const phone = `+4479${String(Date.now()).slice(-8)}`;
    const user = await createVerifiedUser(ctx, { phone });
    const other = await createVerifiedUser(ctx);
    const s1 = await signIn(ctx, { username: user.username, password: user.password });
    const s2 = await signIn(ctx, { username: user.username, password: user.password });
    const o = await signIn(ctx, { username: other.username, password: other.password });
    expect((await rowsOf(user.id)).sessions).toBe(2);

    const res = await deleteAccount(s1.accessToken, { password: user.password });
    expect(res.statusCode, res.body).toBe(204);
    expect(res.body).toBe('');
    const cookie = setCookies(res).find((c) => c.name === 'refresh_token');
    expect(cookie).toMatchObject({ value: '', attributes: { 'max-age': '0', path: '/auth/v0/refresh', httponly: true, secure: true, samesite: 'Strict' } });

    expect(await rowsOf(user.id)).toEqual({ users: 0, devices: 0, sessions: 0, codes: 0 });
    expect(await refreshTokensOf([s1.sessionId, s2.sessionId])).toBe(0);
    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', s1.accessToken), 401, 'auth.invalid_access_token');
    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', s2.accessToken), 401, 'auth.invalid_access_token');
    expect((await refresh(ctx, s1.refreshToken)).statusCode).toBe(401);
    expect((await refresh(ctx, s2.refreshToken)).statusCode).toBe(401);
    expectError(await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: user.password }), 401, 'auth.invalid_credentials');
    // Deleting again with the dead token: 401 at the Bearer check.
    expectError(await deleteAccount(s2.accessToken, { password: user.password }), 401, 'auth.invalid_access_token');

    expect((await withBearer(ctx, 'GET', '/auth/v0/me', o.accessToken)).statusCode).toBe(200);
    expect((await rowsOf(other.id)).users).toBe(1);

    // Its username, email and phone are free for a new sign-up.
    const again = await signUp(ctx, { username: user.username, email: user.email, phone, password: 'another fine passphrase' });
    expect(again.res.statusCode, again.res.body).toBe(201);
    expect(again.body.user.id).not.toBe(user.id);
  });

  it('cancels the emails queued to the address and not yet sent; the account_deleted notice is delivered, with no secret and no link', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password }, { 'user-agent': 'DeleteTest/2.0' });
    // A resend would send nothing to a verified address: queue a notice (a password change) and keep it unsent.
    const newPassword = 'plum tractor velvet harbour';
    expect((await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: newPassword })).statusCode).toBe(204);
    const s2 = await signIn(ctx, { username: user.username, password: newPassword });
    const before = ctx.smtp.messages.filter((m) => m.to.includes(user.email)).length; // the verification email

    const res = await deleteAccount(s2.accessToken, { password: newPassword }, { 'user-agent': 'DeleteTest/2.0' });
    expect(res.statusCode).toBe(204);
    const { rows } = await ctx.db.query<{ status: string; notice: string; payload: Record<string, unknown> }>(
      `SELECT status, payload->>'notice' AS notice, payload FROM email_outbox WHERE recipient = $1 AND kind = 'notice' ORDER BY notice`,
      [user.email],
    );
    // The unsent password_changed notice was cancelled, then deleted with the finished rows.
    expect(rows.map((r) => [r.notice, r.status])).toEqual([['account_deleted', 'pending']]);
    expect(JSON.stringify(rows[0]!.payload)).not.toContain(user.id);

    const mails = await mailsTo(ctx, user.email, before + 1);
    expect(mails).toHaveLength(before + 1);
    const text = mailText(mails.at(-1)!);
    expect(text).toContain('Subject: Your account was deleted');
    expect(text).toContain('From: 127.0.0.1');
    expect(text).toContain('Browser or app: "DeleteTest/2[.]0"');
    expect(text).toMatch(/When: \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/);
    expect(text).toContain('If you did not do this');
    // It claims only what was deleted, and says what is kept.
    expect(text).not.toContain('everything');
    expect(text).toContain('The service keeps this notice');
    for (const secret of [user.password, newPassword, s2.accessToken, s2.refreshToken]) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/https?:\/\//);
    // Nothing else arrives: the cancelled notice is never sent.
    await ctx.app.outbox.runOnce();
    expect(ctx.smtp.messages.filter((m) => m.to.includes(user.email))).toHaveLength(before + 1);
  });

  it('deletes the finished emails to the address and the account\'s sign_in_account rate-limit row; keeps other addresses\' emails and other users\' rows', async () => {
    const user = await createVerifiedUser(ctx);
    const other = await createVerifiedUser(ctx);
    // A window of failed sign-ins counted against each account (sign_in_account:<user id>).
    for (const u of [user, other]) {
      await ctx.db.query('INSERT INTO rate_limits (key, window_start, hits) VALUES ($1, now(), 1)', [`sign_in_account:${u.id}`]);
    }
    const limitRows = async (id: string) =>
      (await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM rate_limits WHERE key = $1', [`sign_in_account:${id}`])).rows[0]!.n;
    expect(await limitRows(user.id)).toBe(1);
    await ctx.app.outbox.runOnce();
    const mail = async (to: string) =>
      (await ctx.db.query<{ kind: string; status: string }>('SELECT kind, status FROM email_outbox WHERE recipient = $1 ORDER BY created_at, id', [to])).rows;
    expect(await mail(user.email)).toEqual([{ kind: 'verification', status: 'sent' }]);
    // A dead row too (an earlier notice the outbox gave up on).
    await ctx.db.query(
      `INSERT INTO email_outbox (id, kind, recipient, payload, status, attempts, next_attempt_at, created_at)
       VALUES ($1, 'notice', $2, '{}'::jsonb, 'dead', 10, now(), now())`,
      [randomUUID(), user.email],
    );

    const s = await signIn(ctx, { username: user.username, password: user.password });
    expect((await deleteAccount(s.accessToken, { password: user.password })).statusCode).toBe(204);

    expect(await limitRows(user.id)).toBe(0);
    expect(await limitRows(other.id)).toBe(1);
    expect(await mail(user.email)).toEqual([{ kind: 'notice', status: 'pending' }]);
    expect(await mail(other.email)).toEqual([{ kind: 'verification', status: 'sent' }]);
  });

  it('a phone-only user is deleted with no email queued', async () => {
    const phone = `+4478${String(Date.now()).slice(-8)}`;
    const { res, request } = await signUp(ctx, { email: undefined, phone });
    expect(res.statusCode).toBe(201);
    const s = await signIn(ctx, { phone, password: request.password as string });
    const queued = (await ctx.db.query('SELECT 1 FROM email_outbox')).rows.length;
    expect((await deleteAccount(s.accessToken, { password: PASSWORD })).statusCode).toBe(204);
    expect((await ctx.db.query('SELECT 1 FROM email_outbox')).rows.length).toBe(queued);
    expect((await signUp(ctx, { email: undefined, phone, username: request.username })).res.statusCode).toBe(201);
  });

  it('counts auth_accounts_deleted_total{cause="owner"}', async () => {
    const scrape = async () => (await ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    const count = (text: string) => Number(/^auth_accounts_deleted_total\{cause="owner"\} (\d+)$/m.exec(text)?.[1]);
    const before = count(await scrape());
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    expect((await deleteAccount(s.accessToken, { password: user.password })).statusCode).toBe(204);
    const text = await scrape();
    expect(count(text)).toBe(before + 1);
    expect(text).toMatch(/^auth_accounts_deleted_total\{cause="operator"\} 0$/m);
  });
});

describe('delete-account refuses', () => {
  it('401 auth.invalid_current_password for a wrong password: nothing deleted, no email queued', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const queued = (await ctx.db.query('SELECT 1 FROM email_outbox WHERE recipient = $1', [user.email])).rows.length;
    expectError(await deleteAccount(s.accessToken, { password: 'not the password at all' }), 401, 'auth.invalid_current_password');
    expect(await rowsOf(user.id)).toMatchObject({ users: 1, sessions: 1 });
    expect((await ctx.db.query('SELECT 1 FROM email_outbox WHERE recipient = $1', [user.email])).rows.length).toBe(queued);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(200);
  });

  it('401 auth.missing_access_token without a Bearer token, 401 auth.invalid_access_token with a bad one', async () => {
    expectError(await postJson(ctx, '/auth/v0/delete-account', { password: PASSWORD }), 401, 'auth.missing_access_token');
    expectError(await deleteAccount('not.a.token', { password: PASSWORD }), 401, 'auth.invalid_access_token');
  });

  it.each([
    ['a missing password', {}],
    ['an unknown member', { password: PASSWORD, confirm: true }],
    ['a password that is not a string', { password: 12345678 }],
    ['a body that is not JSON', 'password=x'],
    ['a JSON array', [PASSWORD]],
  ])('400 auth.delete_account.validation_failed for %s, nothing deleted', async (_what, body) => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    expectError(await deleteAccount(s.accessToken, body), 400, 'auth.delete_account.validation_failed');
    expect((await rowsOf(user.id)).users).toBe(1);
  });

  it.each([
    [{}, 'password is required'],
    [{ password: 12345678 }, 'password must be a string'],
    [{ password: PASSWORD, confirm: true }, 'unknown member "confirm"'],
  ])('400 messages are plain words: %j -> %s', async (body, message) => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const res = await deleteAccount(s.accessToken, body);
    expect(res.statusCode).toBe(400);
    expect((res.json() as { message: string }).message).toBe(message);
  });

  it('413 request.body_too_large for a body over 16 KiB', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    expectError(await deleteAccount(s.accessToken, { password: 'x'.repeat(17 * 1024) }), 413, 'request.body_too_large');
    expect((await rowsOf(user.id)).users).toBe(1);
  });
});

describe('delete-account is rate-limited per user like change-password (3 here)', () => {
  let limited: TestContext;
  beforeAll(async () => {
    limited = await createTestContext({ RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '3' });
  });
  afterAll(async () => limited.close());

  it('429 auth.delete_account.too_many_attempts with Retry-After after 3 wrong passwords, even for the right one; the window ends', async () => {
    const user = await createVerifiedUser(limited);
    const { accessToken } = await signIn(limited, { username: user.username, password: user.password });
    const attempt = (password: string) =>
      limited.app.inject({ method: 'POST', url: '/auth/v0/delete-account', headers: { authorization: `Bearer ${accessToken}` }, payload: { password } });
    for (let i = 0; i < 3; i++) expect((await attempt('not the password')).statusCode).toBe(401);
    const res = await attempt(user.password);
    expect(res.statusCode).toBe(429);
    expect(res.json()).toEqual({ code: 'auth.delete_account.too_many_attempts', message: expect.any(String) });
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(900);
    const { rows } = await limited.db.query('SELECT 1 FROM users WHERE id = $1', [user.id]);
    expect(rows).toHaveLength(1);
    limited.clock.advance(15 * 60 + 1);
    expect((await attempt(user.password)).statusCode).toBe(204);
  });
});

describe('deletion racing a refresh', () => {
  it('leaves no live session: whatever the order, the account, its sessions and refresh tokens are gone and every token answers 401', async () => {
    for (let round = 0; round < 5; round++) {
      const user = await createVerifiedUser(ctx, { username: uniqueName('race') });
      const s = await signIn(ctx, { username: user.username, password: user.password });
      const [del, ref] = await Promise.all([deleteAccount(s.accessToken, { password: user.password }), refresh(ctx, s.refreshToken)]);
      expect(del.statusCode, del.body).toBe(204);
      expect([200, 401]).toContain(ref.statusCode);
      expect(await rowsOf(user.id)).toEqual({ users: 0, devices: 0, sessions: 0, codes: 0 });
      expect(await refreshTokensOf([s.sessionId])).toBe(0);
      if (ref.statusCode === 200) {
        const rotated = setCookies(ref).find((c) => c.name === 'refresh_token')!.value;
        const access = (ref.json() as { tokens: { access_token: string } }).tokens.access_token;
        expect((await refresh(ctx, rotated)).statusCode).toBe(401);
        expect((await withBearer(ctx, 'GET', '/auth/v0/me', access)).statusCode).toBe(401);
      }
      expect((await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(401);
    }
  });
});

describe('deletion racing a sign-in', () => {
  it('leaves no session: a sign-in that won the race has its session deleted with the account, one that lost answers 401', async () => {
    for (let round = 0; round < 5; round++) {
      const user = await createVerifiedUser(ctx, { username: uniqueName('race') });
      const s = await signIn(ctx, { username: user.username, password: user.password });
      const [del, sin] = await Promise.all([
        deleteAccount(s.accessToken, { password: user.password }),
        postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: user.password }),
      ]);
      expect(del.statusCode, del.body).toBe(204);
      expect([200, 401]).toContain(sin.statusCode);
      expect(await rowsOf(user.id)).toEqual({ users: 0, devices: 0, sessions: 0, codes: 0 });
      if (sin.statusCode === 200) {
        const access = (sin.json() as { tokens: { access_token: string } }).tokens.access_token;
        expect((await withBearer(ctx, 'GET', '/auth/v0/me', access)).statusCode).toBe(401);
        expect((await refresh(ctx, setCookies(sin).find((c) => c.name === 'refresh_token')!.value)).statusCode).toBe(401);
      }
    }
  });
});

describe('logs', () => {
  it('no password, access token or refresh token appears in any log line; the deletion is a security event', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    expect((await deleteAccount(s.accessToken, { password: 'a wrong guess here' })).statusCode).toBe(401);
    expect((await deleteAccount(s.accessToken, { password: user.password })).statusCode).toBe(204);
    const all = ctx.rawLogs.join('\n');
    for (const secret of [user.password, 'a wrong guess here', s.accessToken, s.refreshToken]) expect(all).not.toContain(secret);
    expect(ctx.logs).toContainEqual(expect.objectContaining({ securityEvent: true, event: 'account.deleted', userId: user.id, reason: 'owner' }));
  });
});
