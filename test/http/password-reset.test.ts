import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOneTimeCodes } from '../../src/modules/codes/one-time-codes.service.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, expectError, latestCode, PASSWORD, postJson, refresh, resetCode as resetCodeOf, signIn, signUp, uniqueName, withBearer } from '../helpers/flows.js';

/** Password reset (docs/api.md#request-a-password-reset, docs/api.md#confirm-a-password-reset). */
const RESET_URL = 'https://app.example.test/account/reset';
const NEW_PASSWORD = 'plum tractor velvet harbour';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ PASSWORD_RESET_URL: RESET_URL, RATE_LIMIT_PASSWORD_RESET_PER_IP: '0', RATE_LIMIT_PASSWORD_RESET_CONFIRM_PER_IP: '0' });
});
afterAll(async () => ctx.close());

/** {@link resetCodeOf} on this file's app. */
const resetCode = (email: string, count = 1) => resetCodeOf(ctx, email, count);

const requestReset = (email: string, headers: Record<string, string> = {}) => postJson(ctx, '/auth/v0/password-reset', { email }, headers);
const confirmReset = (email: string, code: string, newPassword = NEW_PASSWORD) =>
  postJson(ctx, '/auth/v0/password-reset/confirm', { email, code, new_password: newPassword });


/** Moves past the one-request-per-address-per-60-s window. */
const nextWindow = () => ctx.clock.advance(61);

describe('POST /auth/v0/password-reset', () => {
  it('a known address: 204, no body, and the reset email with the code and the configured link arrives at the SMTP server', async () => {
    const user = await createVerifiedUser(ctx);
    const res = await requestReset(user.email);
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    const { code, text } = await resetCode(user.email);
    expect(text).toContain(`${RESET_URL}#email=${encodeURIComponent(user.email)}&code=${code}`);
  });

  it('the link comes from PASSWORD_RESET_URL only: a forged Host or X-Forwarded-Host changes nothing', async () => {
    const user = await createVerifiedUser(ctx);
    const res = await requestReset(user.email, { host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'http' });
    expect(res.statusCode).toBe(204);
    const { code, text } = await resetCode(user.email);
    expect(text).toContain(`${RESET_URL}#email=${encodeURIComponent(user.email)}&code=${code}`);
    expect(text).not.toContain('evil.example');
  });

  it('an unknown address: the same 204 and one request row, which the worker marks suppressed (nothing sent) with no email and no code', async () => {
    const email = `${uniqueName('nobody')}@example.test`;
    const res = await requestReset(email);
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    await ctx.app.outbox.runOnce();
    await ctx.app.outbox.runOnce();
    expect(ctx.smtp.messages.filter((m) => m.to.includes(email))).toEqual([]);
    expect((await ctx.db.query('SELECT kind, status FROM email_outbox WHERE recipient = $1', [email])).rows).toEqual([
      { kind: 'password_reset_request', status: 'suppressed' },
    ]);
    expect((await ctx.db.query('SELECT 1 FROM verification_codes WHERE email = $1', [email])).rows).toEqual([]);
  });

  it('an unverified address also gets a code; the reset marks the email verified and sign-in then works', async () => {
    const { body, request } = await signUp(ctx);
    const email = body.user.email!;
    expect((await requestReset(email)).statusCode).toBe(204);
    const { code } = await resetCode(email);
    expect((await confirmReset(email, code)).statusCode).toBe(204);
    const { rows } = await ctx.db.query<{ is_email_verified: boolean }>('SELECT is_email_verified FROM users WHERE id = $1', [body.user.id]);
    expect(rows[0]!.is_email_verified).toBe(true);
    await signIn(ctx, { username: request.username, password: NEW_PASSWORD });
  });

  it('one request per address per 60 s, known or not: 429 auth.password_reset.too_many_attempts with Retry-After; then again', async () => {
    const user = await createVerifiedUser(ctx);
    const unknown = `${uniqueName('nobody')}@example.test`;
    for (const email of [user.email, unknown]) {
      expect((await requestReset(email)).statusCode).toBe(204);
      const again = await requestReset(email);
      expectError(again, 429, 'auth.password_reset.too_many_attempts');
      expect(Number(again.headers['retry-after'])).toBeGreaterThan(0);
    }
    nextWindow();
    expect((await requestReset(user.email)).statusCode).toBe(204);
  });

  it('a malformed address or an unknown member: 400 auth.password_reset.validation_failed', async () => {
    expectError(await postJson(ctx, '/auth/v0/password-reset', { email: 'not an address' }), 400, 'auth.password_reset.validation_failed');
    expectError(await postJson(ctx, '/auth/v0/password-reset', { email: 'a@example.test', extra: 1 }), 400, 'auth.password_reset.validation_failed');
  });
});

describe('POST /auth/v0/password-reset/confirm', () => {
  it('success: 204; the password is replaced, every session ends at once, the code is spent, a notice is queued, nobody is signed in', async () => {
    const user = await createVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: PASSWORD });
    const b = await signIn(ctx, { username: user.username, password: PASSWORD });
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const { code } = await resetCode(user.email);
    const res = await confirmReset(user.email, code);
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect(res.headers['set-cookie']).toBeUndefined();
    for (const s of [a, b]) {
      expectError(await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken), 401, 'auth.invalid_access_token');
      expect((await refresh(ctx, s.refreshToken)).statusCode).toBe(401);
    }
    expectError(await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: PASSWORD }), 401, 'auth.invalid_credentials');
    await signIn(ctx, { username: user.username, password: NEW_PASSWORD });
    // The code is spent: a second use finds no active code.
    expectError(await confirmReset(user.email, code, 'another fine passphrase'), 410, 'auth.password_reset.code_expired');
    const { rows } = await ctx.db.query<{ kind: string }>("SELECT kind FROM email_outbox WHERE recipient = $1 AND kind = 'notice'", [user.email]);
    expect(rows).toHaveLength(1);
    const { rows: revoked } = await ctx.db.query<{ revoked_reason: string }>('SELECT revoked_reason FROM sessions WHERE id = ANY($1)', [[a.sessionId, b.sessionId]]);
    expect(revoked.map((r) => r.revoked_reason)).toEqual(['password_reset', 'password_reset']);
  });

  it('unknown email, no code ever issued, and an expired code: 410 auth.password_reset.code_expired', async () => {
    expectError(await confirmReset(`${uniqueName('nobody')}@example.test`, '123456'), 410, 'auth.password_reset.code_expired');
    const user = await createVerifiedUser(ctx);
    expectError(await confirmReset(user.email, '123456'), 410, 'auth.password_reset.code_expired');
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const { code } = await resetCode(user.email);
    ctx.clock.advance(ctx.config.oneTimeCodeTtlSeconds + 1);
    expectError(await confirmReset(user.email, code), 410, 'auth.password_reset.code_expired');
  });

  it('a wrong code: 410 code_mismatch; after 5 wrong tries the code is dead (410 too_many_attempts), even for the right code', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const { code } = await resetCode(user.email);
    const wrong = code === '000000' ? '111111' : '000000';
    for (let i = 1; i <= 4; i++) expectError(await confirmReset(user.email, wrong), 410, 'auth.password_reset.code_mismatch');
    expectError(await confirmReset(user.email, wrong), 410, 'auth.password_reset.too_many_attempts');
    expectError(await confirmReset(user.email, code), 410, 'auth.password_reset.too_many_attempts');
    await signIn(ctx, { username: user.username, password: PASSWORD });
  });

  it('a password the policy refuses: 400 auth.password_reset.validation_failed with the reason, and the code stays usable', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const { code } = await resetCode(user.email);
    const refused = await confirmReset(user.email, code, 'password');
    expectError(refused, 400, 'auth.password_reset.validation_failed');
    expect((refused.json() as { message: string }).message).toMatch(/common/);
    expectError(await confirmReset(user.email, code, 'short'), 400, 'auth.password_reset.validation_failed');
    expect((await confirmReset(user.email, code)).statusCode).toBe(204);
  });

  it('a newer code supersedes the older one', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const first = await resetCode(user.email);
    nextWindow();
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const second = await resetCode(user.email, 2);
    if (first.code !== second.code) expectError(await confirmReset(user.email, first.code), 410, 'auth.password_reset.code_mismatch');
    expect((await confirmReset(user.email, second.code)).statusCode).toBe(204);
  });

  it('codes are bound to their purpose: a verification code never resets a password, a reset code never verifies an email', async () => {
    const { body } = await signUp(ctx);
    const email = body.user.email!;
    const verificationCode = await latestCode(ctx, email);
    // No reset code yet: the verification code finds none.
    expectError(await confirmReset(email, verificationCode), 410, 'auth.password_reset.code_expired');
    expect((await requestReset(email)).statusCode).toBe(204);
    const { code: resetCodeValue } = await resetCode(email);
    if (resetCodeValue !== verificationCode) {
      expectError(await postJson(ctx, '/auth/v0/verify-email', { email, code: resetCodeValue }), 410, 'auth.verify_email.code_mismatch');
      expectError(await confirmReset(email, verificationCode), 410, 'auth.password_reset.code_mismatch');
    }
    // Each still works for its own purpose.
    expect((await postJson(ctx, '/auth/v0/verify-email', { email, code: verificationCode })).statusCode).toBe(204);
    expect((await confirmReset(email, resetCodeValue)).statusCode).toBe(204);
  });

  it('change-password kills the outstanding reset codes', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const { code } = await resetCode(user.email);
    const s = await signIn(ctx, { username: user.username, password: PASSWORD });
    const changed = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: PASSWORD, new_password: NEW_PASSWORD });
    expect(changed.statusCode).toBe(204);
    expectError(await confirmReset(user.email, code, 'a third fine passphrase'), 410, 'auth.password_reset.code_expired');
  });

  it('two parallel confirmations of one code change the state once: one 204, the other 410', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const { code } = await resetCode(user.email);
    const results = await Promise.all([confirmReset(user.email, code, NEW_PASSWORD), confirmReset(user.email, code, 'another fine passphrase')]);
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([204, 410]);
    const winner = results[0]!.statusCode === 204 ? NEW_PASSWORD : 'another fine passphrase';
    await signIn(ctx, { username: user.username, password: winner });
    const { rows } = await ctx.db.query("SELECT 1 FROM email_outbox WHERE recipient = $1 AND kind = 'notice'", [user.email]);
    expect(rows).toHaveLength(1);
  });

  it('a malformed code or unknown member: 400 auth.password_reset.validation_failed', async () => {
    expectError(await confirmReset('a@example.test', '12345'), 400, 'auth.password_reset.validation_failed');
    expectError(await postJson(ctx, '/auth/v0/password-reset/confirm', { email: 'a@example.test', code: '123456', new_password: NEW_PASSWORD, x: 1 }), 400, 'auth.password_reset.validation_failed');
  });

  it('metrics count requested and completed resets', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.body).toMatch(/auth_password_resets_total\{outcome="requested"\} [1-9]/);
    expect(res.body).toMatch(/auth_password_resets_total\{outcome="completed"\} [1-9]/);
    expect(res.body).toMatch(/auth_sessions_revoked_total\{cause="password_reset"\} [1-9]/);
  });

  it('no code, password or link reaches the log', async () => {
    const user = await createVerifiedUser(ctx);
    nextWindow();
    expect((await requestReset(user.email)).statusCode).toBe(204);
    const { code } = await resetCode(user.email);
    const wrong = code === '000000' ? '111111' : '000000';
    expect((await confirmReset(user.email, wrong, 'yet another passphrase')).statusCode).toBe(410);
    expect((await confirmReset(user.email, code, 'password')).statusCode).toBe(400);
    const pw = 'the final hygiene passphrase';
    expect((await confirmReset(user.email, code, pw)).statusCode).toBe(204);
    const all = ctx.rawLogs.join('\n');
    for (const secret of [code, pw, 'yet another passphrase', NEW_PASSWORD, RESET_URL]) expect(all).not.toContain(secret);
  });
});

describe('password-reset rate limits per client', () => {
  let limited: TestContext;
  beforeAll(async () => {
    limited = await createTestContext({ RATE_LIMIT_PASSWORD_RESET_PER_IP: '2', RATE_LIMIT_PASSWORD_RESET_CONFIRM_PER_IP: '2' });
  });
  afterAll(async () => limited.close());

  const post = (url: string, body: unknown, remoteAddress: string) =>
    limited.app.inject({ method: 'POST', url, payload: body as Record<string, unknown>, remoteAddress, headers: { 'content-type': 'application/json' } });

  it('requests per client network (an IPv6 /64): the third from one /64 is 429, another network is not blocked', async () => {
    for (let i = 0; i < 2; i++) expect((await post('/auth/v0/password-reset', { email: `${uniqueName('x')}@example.test` }, `2001:db8::${i + 1}`)).statusCode).toBe(204);
    const third = await post('/auth/v0/password-reset', { email: `${uniqueName('x')}@example.test` }, '2001:db8::ff');
    expectError(third, 429, 'auth.password_reset.too_many_attempts');
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    expect((await post('/auth/v0/password-reset', { email: `${uniqueName('x')}@example.test` }, '2001:db8:1::1')).statusCode).toBe(204);
  });

  it('failed confirmations per client: a stranger is stopped, the owner elsewhere still resets with the right code', async () => {
    const email = `${uniqueName('x')}@example.test`;
    for (let i = 0; i < 2; i++) expect((await post('/auth/v0/password-reset/confirm', { email, code: '000000', new_password: NEW_PASSWORD }, '198.51.100.7')).statusCode).toBe(410);
    expectError(await post('/auth/v0/password-reset/confirm', { email, code: '000000', new_password: NEW_PASSWORD }, '198.51.100.7'), 429, 'auth.password_reset.too_many_attempts');
    expect((await post('/auth/v0/password-reset/confirm', { email, code: '000000', new_password: NEW_PASSWORD }, '203.0.113.9')).statusCode).toBe(410);
  });
});

describe('password reset with the breached-password check (PASSWORD_BREACH_CHECK=hibp)', () => {
  /** Passes every local rule; the range server below lists it. */
  const BREACHED = 'Velvet Harbor Quietly 77';
  let breachCtx: TestContext;
  let server: Server;
  beforeAll(async () => {
    const hash = createHash('sha1').update(BREACHED, 'utf8').digest('hex').toUpperCase();
    server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(req.url === `/range/${hash.slice(0, 5)}` ? `${hash.slice(5)}:42\r\n` : '');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    breachCtx = await createTestContext({ PASSWORD_BREACH_CHECK: 'hibp', PASSWORD_BREACH_API_URL: `http://127.0.0.1:${port}/range/` });
  });
  afterAll(async () => {
    await breachCtx.close();
    await new Promise((resolve) => server.close(resolve));
  });

  it('a breached new password: 400 auth.password_reset.validation_failed with the reason, and the code stays usable', async () => {
    const user = await createVerifiedUser(breachCtx);
    expect((await postJson(breachCtx, '/auth/v0/password-reset', { email: user.email })).statusCode).toBe(204);
    const { code } = await resetCodeOf(breachCtx, user.email);
    const refused = await postJson(breachCtx, '/auth/v0/password-reset/confirm', { email: user.email, code, new_password: BREACHED });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toEqual({ code: 'auth.password_reset.validation_failed', message: 'password has appeared in a data breach; choose another one.' });
    expect((await postJson(breachCtx, '/auth/v0/password-reset/confirm', { email: user.email, code, new_password: NEW_PASSWORD })).statusCode).toBe(204);
  });
});

describe('queued reset emails (outbox worker stopped)', () => {
  let quiet: TestContext;
  beforeAll(async () => {
    quiet = await createTestContext({ RATE_LIMIT_PASSWORD_RESET_PER_IP: '0' }, { startOutboxWorker: false });
  });
  afterAll(async () => quiet.close());

  it("a newer reset code cancels the older code's queued email, and neither touches the pending verification email", async () => {
    const { body } = await signUp(quiet);
    const email = body.user.email!;
    for (let i = 0; i < 2; i++) {
      expect((await postJson(quiet, '/auth/v0/password-reset', { email })).statusCode).toBe(204);
      // The request's work, as the worker does it, without sending the pending emails.
      await quiet.db.transaction((tx) => quiet.app.passwordReset.handleRequest(tx, email));
      quiet.clock.advance(61);
    }
    const { rows } = await quiet.db.query<{ kind: string; status: string }>(
      "SELECT kind, status FROM email_outbox WHERE recipient = $1 AND kind <> 'password_reset_request' ORDER BY created_at, id",
      [email],
    );
    expect(rows).toEqual([
      { kind: 'verification', status: 'pending' },
      { kind: 'password_reset', status: 'cancelled' },
      { kind: 'password_reset', status: 'pending' },
    ]);
    const { rows: codes } = await quiet.db.query<{ purpose: string; live: boolean }>(
      'SELECT purpose, (superseded_at IS NULL AND consumed_at IS NULL) AS live FROM verification_codes WHERE email = $1 ORDER BY created_at, id',
      [email],
    );
    expect(codes).toEqual([
      { purpose: 'verification', live: true },
      { purpose: 'password_reset', live: false },
      { purpose: 'password_reset', live: true },
    ]);
  });

  it('a request is one durable outbox row holding the address only; a worker round issues the code and queues its email, and marks the request done', async () => {
    const { body } = await signUp(quiet);
    const email = body.user.email!;
    expect((await postJson(quiet, '/auth/v0/password-reset', { email })).statusCode).toBe(204);
    const queued = await quiet.db.query<{ kind: string; status: string; payload: unknown }>(
      "SELECT kind, status, payload FROM email_outbox WHERE recipient = $1 AND kind = 'password_reset_request'",
      [email],
    );
    expect(queued.rows).toEqual([{ kind: 'password_reset_request', status: 'pending', payload: {} }]);
    expect((await quiet.db.query("SELECT 1 FROM verification_codes WHERE email = $1 AND purpose = 'password_reset'", [email])).rows).toEqual([]);
    await quiet.app.outbox.runOnce();
    const { rows } = await quiet.db.query<{ kind: string; status: string }>(
      "SELECT kind, status FROM email_outbox WHERE recipient = $1 AND kind LIKE 'password_reset%' ORDER BY kind",
      [email],
    );
    expect(rows).toEqual([
      { kind: 'password_reset', status: 'pending' },
      { kind: 'password_reset_request', status: 'sent' },
    ]);
    expect((await quiet.db.query("SELECT 1 FROM verification_codes WHERE email = $1 AND purpose = 'password_reset'", [email])).rows).toHaveLength(1);
  });

  it('a user deleted between the lookup and the insert: no code, no email, no error, for either purpose', async () => {
    const { body } = await signUp(quiet);
    const email = body.user.email!;
    const { rows } = await quiet.db.query<{ id: string; username: string }>('SELECT id, username FROM users WHERE email = $1', [email]);
    const user = { id: rows[0]!.id, username: rows[0]!.username, email };
    await quiet.db.query('DELETE FROM users WHERE id = $1', [user.id]);
    const codes = createOneTimeCodes({ clock: quiet.clock, codeHmacKey: quiet.app.keys.codeHmacKey });
    for (const purpose of ['verification', 'password_reset'] as const) {
      expect(await quiet.db.transaction((tx) => codes.issue(tx, { purpose, user, ttlSeconds: 600 }))).toBe(false);
    }
    expect((await quiet.db.query('SELECT 1 FROM verification_codes WHERE email = $1', [email])).rows).toEqual([]);
    expect((await quiet.db.query("SELECT 1 FROM email_outbox WHERE recipient = $1 AND kind = 'password_reset'", [email])).rows).toEqual([]);
  });

  it("revoking a purpose's codes also cancels their queued emails to the address", async () => {
    const { body } = await signUp(quiet);
    const email = body.user.email!;
    await quiet.db.transaction((tx) => quiet.app.passwordReset.handleRequest(tx, email));
    const { rows } = await quiet.db.query<{ id: string }>('SELECT id FROM users WHERE email = $1', [email]);
    const codes = createOneTimeCodes({ clock: quiet.clock, codeHmacKey: quiet.app.keys.codeHmacKey });
    expect(await quiet.db.transaction((tx) => codes.revokeAll(tx, 'password_reset', { id: rows[0]!.id, email }))).toBe(1);
    const outbox = await quiet.db.query<{ kind: string; status: string }>(
      "SELECT kind, status FROM email_outbox WHERE recipient = $1 AND kind IN ('password_reset', 'verification') ORDER BY created_at, id",
      [email],
    );
    expect(outbox.rows).toEqual([
      { kind: 'verification', status: 'pending' },
      { kind: 'password_reset', status: 'cancelled' },
    ]);
  });
});
