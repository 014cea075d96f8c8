import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, emailChangeCode, expectError, PASSWORD, postJson, refresh, resetCode, signIn, signUp, textOf, uniqueName, withBearer } from '../helpers/flows.js';
import type { ReceivedMail } from '../helpers/smtp.js';

/**
 * POST /auth/v0/change-email and POST /auth/v0/change-email/confirm (docs/api.md#change-email,
 * docs/api.md#confirm-an-email-change): every status and error code, nothing changed before the
 * confirmation, the code to the new address and the notices to the old one in a real SMTP
 * server's inbox, purpose binding, supersession, 5 tries, the per-user and per-client limits,
 * and the codes a change, a password change and an account deletion end.
 */
let ctx: TestContext;
beforeAll(async () => {
  // The worker is driven by runOnce only, so queued emails stay queued until a test sends them.
  ctx = await createTestContext({ RATE_LIMIT_CHANGE_EMAIL_PER_USER: '0', RATE_LIMIT_CHANGE_EMAIL_CONFIRM_PER_IP: '0' }, { startOutboxWorker: false });
});
afterAll(async () => ctx.close());

const NEW_PASSWORD = 'plum tractor velvet harbour';

function changeEmail(c: TestContext, token: string, body: unknown): Promise<LightMyRequestResponse> {
  return postJson(c, '/auth/v0/change-email', body, { authorization: `Bearer ${token}` });
}

function confirmChange(c: TestContext, token: string, body: unknown): Promise<LightMyRequestResponse> {
  return postJson(c, '/auth/v0/change-email/confirm', body, { authorization: `Bearer ${token}` });
}


/** Runs the outbox until `count` emails whose subject matches `subject` arrived for `email`; returns them. */
async function mailsOf(c: TestContext, email: string, subject: RegExp, count = 1): Promise<ReceivedMail[]> {
  for (let i = 0; i < 100; i++) {
    await c.app.outbox.runOnce();
    const mine = c.smtp.messages.filter((m) => m.to.includes(email) && subject.test(textOf(m)));
    if (mine.length >= count) return mine;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`fewer than ${count} emails to ${email} matching ${String(subject)} arrived`);
}

/** A verified user signed in once. */
async function signedInUser(c: TestContext = ctx) {
  const user = await createVerifiedUser(c);
  const session = await signIn(c, { username: user.username, password: PASSWORD });
  return { user, session, token: session.accessToken };
}

const newAddress = (): string => `${uniqueName('moved')}@example.test`;

async function me(c: TestContext, token: string) {
  const res = await withBearer(c, 'GET', '/auth/v0/me', token);
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { user: { email: string | null; is_email_verified: boolean } }).user;
}

const wrongCode = (code: string): string => (code === '000000' ? '111111' : '000000');

describe('change-email succeeds', () => {
  it('204; the code goes to the new address, a notice to the old one; nothing changes until the code is confirmed; then 200 {user}, verified, sessions kept, a second notice', async () => {
    const { user, session, token } = await signedInUser();
    const target = newAddress();
    const res = await changeEmail(ctx, token, { new_email: target.toUpperCase(), password: PASSWORD });
    expect(res.statusCode, res.body).toBe(204);
    expect(res.body).toBe('');
    const code = await emailChangeCode(ctx, target);

    const [requested] = await mailsOf(ctx, user.email, /Subject: A change of your email address was requested/);
    const notice = textOf(requested!);
    expect(notice).toContain('From: 127.0.0.1');
    expect(notice).not.toContain(code);
    expect(notice).not.toMatch(/https?:\/\//);

    // Nothing changed yet: the old address signs in, the new one does not, and it is still free to register.
    expect(await me(ctx, token)).toMatchObject({ email: user.email, is_email_verified: true });
    expect((await postJson(ctx, '/auth/v0/sign-in', { email: user.email, password: PASSWORD })).statusCode).toBe(200);
    expect((await postJson(ctx, '/auth/v0/sign-in', { email: target, password: PASSWORD })).statusCode).toBe(401);

    const confirmed = await confirmChange(ctx, token, { code });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    const body = confirmed.json() as { user: Record<string, unknown> };
    expect(Object.keys(body)).toEqual(['user']);
    expect(body.user).toEqual({ id: user.id, username: user.username, email: target, phone: null, is_email_verified: true, is_phone_verified: false });

    // Sessions are kept: the access token and the refresh token still work.
    expect(await me(ctx, token)).toMatchObject({ email: target, is_email_verified: true });
    expect((await refresh(ctx, session.refreshToken)).statusCode).toBe(200);
    // The new address signs in; the old one no longer names the account and is free again.
    expect((await postJson(ctx, '/auth/v0/sign-in', { email: target, password: PASSWORD })).statusCode).toBe(200);
    expect((await postJson(ctx, '/auth/v0/sign-in', { email: user.email, password: PASSWORD })).statusCode).toBe(401);
    const changed = textOf((await mailsOf(ctx, user.email, /Subject: The email address of your account was changed/))[0]!);
    expect(changed).not.toContain(code);
    expect(changed).toContain('From: 127.0.0.1');
    const again = await signUp(ctx, { email: user.email });
    expect(again.res.statusCode, again.res.body).toBe(201);

    // The code is consumed.
    expectError(await confirmChange(ctx, token, { code }), 410, 'auth.change_email.code_expired');
  });

  it('a phone-only user adds an email the same way, and no notice goes anywhere (no old address)', async () => {
    const phone = `+4479${String(Date.now()).slice(-8)}`;
    const username = uniqueName('phone');
    const signed = await postJson(ctx, '/auth/v0/sign-up', { username, phone, password: PASSWORD });
    expect(signed.statusCode, signed.body).toBe(201);
    const session = await signIn(ctx, { phone, password: PASSWORD });
    const target = newAddress();
    expect((await changeEmail(ctx, session.accessToken, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(ctx, target);
    const res = await confirmChange(ctx, session.accessToken, { code });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ user: { username, email: target, phone, is_email_verified: true } });
    const { rows } = await ctx.db.query("SELECT 1 FROM email_outbox WHERE kind = 'notice' AND payload->>'username' = $1", [username]);
    expect(rows).toEqual([]);
  });

});

describe('change-email request errors, each changing nothing', () => {
  it('401 without a token or with a bad one', async () => {
    expectError(await postJson(ctx, '/auth/v0/change-email', { new_email: newAddress(), password: PASSWORD }), 401, 'auth.missing_access_token');
    expectError(await changeEmail(ctx, 'not-a-token', { new_email: newAddress(), password: PASSWORD }), 401, 'auth.invalid_access_token');
    expectError(await confirmChange(ctx, 'not-a-token', { code: '123456' }), 401, 'auth.invalid_access_token');
  });

  it('400 auth.change_email.validation_failed for a malformed body, an unknown member, or the current address (in any case)', async () => {
    const { user, token } = await signedInUser();
    for (const body of [
      {},
      { new_email: 'not an email', password: PASSWORD },
      { new_email: newAddress() },
      { new_email: newAddress(), password: PASSWORD, extra: 1 },
      { new_email: `${'a'.repeat(320)}@example.test`, password: PASSWORD },
      { new_email: user.email, password: PASSWORD },
      { new_email: user.email.toUpperCase(), password: PASSWORD },
    ]) {
      expectError(await changeEmail(ctx, token, body), 400, 'auth.change_email.validation_failed');
    }
    for (const body of [{}, { code: '12345' }, { code: 'abcdef' }, { code: '123456', extra: true }]) {
      expectError(await confirmChange(ctx, token, body), 400, 'auth.change_email.validation_failed');
    }
    const { rows } = await ctx.db.query("SELECT 1 FROM verification_codes WHERE user_id = $1 AND purpose = 'email_change'", [user.id]);
    expect(rows).toEqual([]);
  });

  it('401 auth.invalid_current_password for a wrong password: no code, no notice', async () => {
    const { user, token } = await signedInUser();
    expectError(await changeEmail(ctx, token, { new_email: newAddress(), password: 'not the password' }), 401, 'auth.invalid_current_password');
    const { rows } = await ctx.db.query(
      "SELECT 1 FROM verification_codes WHERE user_id = $1 AND purpose = 'email_change' UNION ALL SELECT 1 FROM email_outbox WHERE recipient = $2 AND kind = 'notice'",
      [user.id, user.email],
    );
    expect(rows).toEqual([]);
  });

  it('409 auth.change_email.email_taken for an address another user has (in any case)', async () => {
    const { token } = await signedInUser();
    const other = await createVerifiedUser(ctx);
    expectError(await changeEmail(ctx, token, { new_email: other.email.toUpperCase(), password: PASSWORD }), 409, 'auth.change_email.email_taken');
  });
});

describe('change-email confirmation', () => {
  it('410 auth.change_email.code_expired with no code, and after the TTL', async () => {
    const { token } = await signedInUser();
    expectError(await confirmChange(ctx, token, { code: '123456' }), 410, 'auth.change_email.code_expired');
    const target = newAddress();
    expect((await changeEmail(ctx, token, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(ctx, target);
    ctx.clock.advance(ctx.config.oneTimeCodeTtlSeconds + 1);
    expectError(await confirmChange(ctx, token, { code }), 410, 'auth.change_email.code_expired');
  });

  it('410 code_mismatch counts a try; the 5th wrong code kills it (too_many_attempts), also for the right code', async () => {
    const { user, token } = await signedInUser();
    const target = newAddress();
    expect((await changeEmail(ctx, token, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(ctx, target);
    for (let i = 0; i < 4; i++) expectError(await confirmChange(ctx, token, { code: wrongCode(code) }), 410, 'auth.change_email.code_mismatch');
    expectError(await confirmChange(ctx, token, { code: wrongCode(code) }), 410, 'auth.change_email.too_many_attempts');
    expectError(await confirmChange(ctx, token, { code }), 410, 'auth.change_email.too_many_attempts');
    expect(await me(ctx, token)).toMatchObject({ email: user.email });
  });

  it('a newer request supersedes the older code (and cancels its queued email); the newer code works', async () => {
    const { token } = await signedInUser();
    const first = newAddress();
    const second = newAddress();
    expect((await changeEmail(ctx, token, { new_email: first, password: PASSWORD })).statusCode).toBe(204);
    const old = await emailChangeCode(ctx, first);
    const outbox = (): Promise<{ rows: { id: string; status: string }[] }> =>
      ctx.db.query("SELECT id, status FROM email_outbox WHERE kind = 'email_change' AND recipient = $1", [first]);
    const sentFirst = (await outbox()).rows;
    expect(sentFirst.map((r) => r.status)).toEqual(['sent']);
    // Queued and not yet sent when the second request supersedes it. Rows are told apart by id,
    // not created_at: the test clock gives both requests the same instant.
    expect((await changeEmail(ctx, token, { new_email: first, password: PASSWORD })).statusCode).toBe(204);
    expect((await changeEmail(ctx, token, { new_email: second, password: PASSWORD })).statusCode).toBe(204);
    const after = (await outbox()).rows;
    expect(after).toHaveLength(2);
    expect(after.find((r) => r.id === sentFirst[0]!.id)?.status).toBe('sent');
    expect(after.find((r) => r.id !== sentFirst[0]!.id)?.status).toBe('cancelled');
    const code = await emailChangeCode(ctx, second);
    if (old !== code) expectError(await confirmChange(ctx, token, { code: old }), 410, 'auth.change_email.code_mismatch');
    const res = await confirmChange(ctx, token, { code });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ user: { email: second } });
  });

  it('409 auth.change_email.email_taken when the address was registered meanwhile; the code stays live', async () => {
    const { user, token } = await signedInUser();
    const target = newAddress();
    expect((await changeEmail(ctx, token, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(ctx, target);
    expect((await signUp(ctx, { email: target })).res.statusCode).toBe(201);
    expectError(await confirmChange(ctx, token, { code }), 409, 'auth.change_email.email_taken');
    expect(await me(ctx, token)).toMatchObject({ email: user.email });
    const { rows } = await ctx.db.query("SELECT 1 FROM verification_codes WHERE user_id = $1 AND purpose = 'email_change' AND consumed_at IS NULL AND superseded_at IS NULL", [user.id]);
    expect(rows).toHaveLength(1);
  });

  it('codes are bound to their purpose: a verification or reset code never confirms a change, a change code never resets', async () => {
    const { user, token } = await signedInUser();
    const target = newAddress();
    expect((await postJson(ctx, '/auth/v0/password-reset', { email: user.email })).statusCode).toBe(204);
    const reset = (await resetCode(ctx, user.email)).code;
    expect((await changeEmail(ctx, token, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(ctx, target);
    if (reset !== code) expectError(await confirmChange(ctx, token, { code: reset }), 410, 'auth.change_email.code_mismatch');
    for (const email of [user.email, target]) {
      const res = await postJson(ctx, '/auth/v0/password-reset/confirm', { email, code, new_password: NEW_PASSWORD });
      expect(res.statusCode).toBe(410);
    }
    const { rows: live } = await ctx.db.query("SELECT 1 FROM verification_codes WHERE user_id = $1 AND purpose = 'password_reset' AND superseded_at IS NULL", [user.id]);
    expect(live).toHaveLength(1);
    expect((await confirmChange(ctx, token, { code })).statusCode).toBe(200);
    // The reset code was sent to the old address: it ends with the change.
    const { rows } = await ctx.db.query("SELECT 1 FROM verification_codes WHERE user_id = $1 AND purpose = 'password_reset' AND superseded_at IS NULL", [user.id]);
    expect(rows).toEqual([]);
    expectError(await postJson(ctx, '/auth/v0/password-reset/confirm', { email: target, code: reset, new_password: NEW_PASSWORD }), 410, 'auth.password_reset.code_expired');
  });

  it('a password change ends the pending email change (it was asked for with the old password)', async () => {
    const { user, token } = await signedInUser();
    const target = newAddress();
    expect((await changeEmail(ctx, token, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(ctx, target);
    const changed = await withBearer(ctx, 'POST', '/auth/v0/change-password', token, { current_password: PASSWORD, new_password: NEW_PASSWORD });
    expect(changed.statusCode, changed.body).toBe(204);
    const again = await signIn(ctx, { username: user.username, password: NEW_PASSWORD });
    expectError(await confirmChange(ctx, again.accessToken, { code }), 410, 'auth.change_email.code_expired');
  });

  it('an account deletion cancels the queued code email to the new address', async () => {
    const { token } = await signedInUser();
    const target = newAddress();
    expect((await changeEmail(ctx, token, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    expect((await withBearer(ctx, 'POST', '/auth/v0/delete-account', token, { password: PASSWORD })).statusCode).toBe(204);
    const { rows } = await ctx.db.query<{ status: string }>("SELECT status FROM email_outbox WHERE kind = 'email_change' AND recipient = $1", [target]);
    expect(rows.map((r) => r.status)).toEqual(['cancelled']);
  });

  it('metrics count requested and completed email changes; no code or password reaches the log', async () => {
    const { token } = await signedInUser();
    const target = newAddress();
    const secret = 'wrong passphrase for the log test';
    expect((await changeEmail(ctx, token, { new_email: target, password: secret })).statusCode).toBe(401);
    expect((await changeEmail(ctx, token, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(ctx, target);
    expect((await confirmChange(ctx, token, { code: wrongCode(code) })).statusCode).toBe(410);
    expect((await confirmChange(ctx, token, { code })).statusCode).toBe(200);
    const metrics = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/auth_email_changes_total\{outcome="requested"\} [1-9]/);
    expect(metrics).toMatch(/auth_email_changes_total\{outcome="completed"\} [1-9]/);
    const all = ctx.rawLogs.join('\n');
    for (const s of [code, wrongCode(code), secret, PASSWORD, token]) expect(all).not.toContain(s);
    expect(ctx.logs.some((l) => l.event === 'email.changed')).toBe(true);
  });
});

describe('change-email rate limits', () => {
  let limited: TestContext;
  beforeAll(async () => {
    limited = await createTestContext({ RATE_LIMIT_CHANGE_EMAIL_PER_USER: '2', RATE_LIMIT_CHANGE_EMAIL_CONFIRM_PER_IP: '2' });
  });
  afterAll(async () => limited.close());

  it('requests per user: every request counts, wrong passwords included; then 429 with Retry-After, also for the right password', async () => {
    const { token } = await signedInUser(limited);
    expect((await changeEmail(limited, token, { new_email: newAddress(), password: 'not it' })).statusCode).toBe(401);
    expect((await changeEmail(limited, token, { new_email: newAddress(), password: PASSWORD })).statusCode).toBe(204);
    const res = await changeEmail(limited, token, { new_email: newAddress(), password: PASSWORD });
    expectError(res, 429, 'auth.change_email.too_many_attempts');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    // Another user is not affected.
    const other = await signedInUser(limited);
    expect((await changeEmail(limited, other.token, { new_email: newAddress(), password: PASSWORD })).statusCode).toBe(204);
  });

  it('failed confirmations per client: 429 with Retry-After after the limit; a success takes its count back', async () => {
    const { token } = await signedInUser(limited);
    const target = newAddress();
    expect((await changeEmail(limited, token, { new_email: target, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(limited, target);
    expect((await confirmChange(limited, token, { code: wrongCode(code) })).statusCode).toBe(410);
    expect((await confirmChange(limited, token, { code })).statusCode).toBe(200);
    expect((await confirmChange(limited, token, { code: wrongCode(code) })).statusCode).toBe(410);
    const res = await confirmChange(limited, token, { code: wrongCode(code) });
    expectError(res, 429, 'auth.change_email.too_many_attempts');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    // Another client network is not affected.
    const elsewhere = await limited.app.inject({
      method: 'POST',
      url: '/auth/v0/change-email/confirm',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ code: wrongCode(code) }),
      remoteAddress: '203.0.113.9',
    });
    expectError(elsewhere, 410, 'auth.change_email.code_expired');
  });
});
