import type { LightMyRequestResponse } from 'fastify';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, expectError, PASSWORD, postJson, refresh, refreshCookieOf, resetCode, setCookies, signIn, textOf, withBearer } from '../helpers/flows.js';
import { codeNow, enrolled as enrolledIn, nextStep, passwordStep, secondStep } from '../helpers/mfa.js';

/**
 * The second factor (docs/api.md#second-factor, docs/api.md#sign-in-second-step): every status
 * and error code of setup, enable, disable, recovery codes and the second sign-in step; replay
 * refused (sequential and racing); recovery codes used once; the challenge's 5 tries and 300 s
 * (controllable clock); `amr`; notices; nothing secret at rest or in the log. The codes are
 * computed with the suite's own RFC 6238 implementation (test/helpers/totp.ts).
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ RATE_LIMIT_MFA_PER_ACCOUNT: '0', RATE_LIMIT_MFA_PER_IP: '0' }, { startOutboxWorker: false });
});
afterAll(async () => ctx.close());

const NEW_PASSWORD = 'plum tractor velvet harbour';

/** A verified, signed-in user with TOTP enabled (in `ctx` unless given). */
const enrolled = (c: TestContext = ctx) => enrolledIn(c);


async function noticesTo(c: TestContext, email: string): Promise<string[]> {
  const { rows } = await c.db.query<{ notice: string }>("SELECT payload->>'notice' AS notice FROM email_outbox WHERE recipient = $1 AND kind = 'notice' ORDER BY created_at, id", [email]);
  return rows.map((r) => r.notice);
}

describe('TOTP setup and enable', () => {
  it('setup answers a 160-bit base32 secret and its otpauth URI; nothing is on until enable; enable answers 10 recovery codes and keeps the session', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', session.accessToken, { password: 'wrong password' }), 401, 'auth.invalid_current_password');
    const setup = await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', session.accessToken, { password: PASSWORD });
    expect(setup.statusCode, setup.body).toBe(200);
    const body = setup.json() as { secret: string; otpauth_uri: string };
    expect(Object.keys(body).sort()).toEqual(['otpauth_uri', 'secret']);
    expect(body.secret).toMatch(/^[A-Z2-7]{32,}$/);
    const uri = new URL(body.otpauth_uri);
    expect(uri.protocol).toBe('otpauth:');
    expect(body.otpauth_uri.startsWith('otpauth://totp/')).toBe(true);
    expect(Object.fromEntries(uri.searchParams)).toEqual({ secret: body.secret, issuer: 'Latchkey', algorithm: 'SHA1', digits: '6', period: '30' });
    // Stored encrypted, never as the secret itself.
    const { rows } = await ctx.db.query<{ secret: string }>('SELECT secret FROM mfa_totp WHERE user_id = $1', [user.id]);
    expect(rows[0]!.secret).not.toContain(body.secret);
    // Not on yet: the password alone still signs in.
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: PASSWORD })).statusCode).toBe(200);

    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/enable', session.accessToken, { code: codeNow(ctx, body.secret, 5) }), 401, 'auth.mfa.invalid_code');
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/enable', session.accessToken, { code: 'abcdef' }), 400, 'auth.mfa.validation_failed');
    // One step of drift is accepted.
    const enable = await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/enable', session.accessToken, { code: codeNow(ctx, body.secret, -1) });
    expect(enable.statusCode, enable.body).toBe(200);
    const codes = (enable.json() as { recovery_codes: string[] }).recovery_codes;
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    for (const code of codes) expect(code).toMatch(/^[a-z2-7]{5}-[a-z2-7]{5}$/);
    // The session that enabled it goes on.
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(200);
    expect(await noticesTo(ctx, user.email)).toEqual(['mfa_enabled']);
    // Setup and enable while enabled: 409.
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', session.accessToken, { password: PASSWORD }), 409, 'auth.mfa.already_enabled');
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/enable', session.accessToken, { code: codeNow(ctx, body.secret) }), 409, 'auth.mfa.already_enabled');
  });

  it('enable without a setup: 400 auth.mfa.validation_failed; without a token: 401', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/enable', session.accessToken, { code: '123456' }), 400, 'auth.mfa.validation_failed');
    expectError(await postJson(ctx, '/auth/v0/mfa/totp/setup', { password: PASSWORD }), 401, 'auth.missing_access_token');
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', session.accessToken, { password: PASSWORD, extra: 1 }), 400, 'auth.mfa.validation_failed');
  });
});

describe('sign-in with a second factor', () => {
  it('the password step answers 403 auth.mfa_required with the challenge cookie and no session; the code completes it like a sign-in, with amr pwd+otp', async () => {
    const { user, secret } = await enrolled();
    const before = await ctx.db.query('SELECT id FROM sessions WHERE user_id = $1', [user.id]);
    const res = await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: PASSWORD });
    expectError(res, 403, 'auth.mfa_required');
    const raw = ([res.headers['set-cookie']].flat() as string[]).find((c) => c.startsWith('mfa_challenge='))!;
    expect(raw).toMatch(/^mfa_challenge=[A-Za-z0-9_-]{43}; Max-Age=300; Path=\/auth\/v0\/sign-in\/mfa; HttpOnly; Secure; SameSite=Strict$/);
    expect(([res.headers['set-cookie']].flat() as string[]).some((c) => c.startsWith('refresh_token='))).toBe(false);
    expect((await ctx.db.query('SELECT id FROM sessions WHERE user_id = $1', [user.id])).rows).toHaveLength(before.rows.length);
    // A wrong password stays 401, as without a second factor.
    expectError(await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: 'not the password' }), 401, 'auth.invalid_credentials');

    const challenge = setCookies(res).find((c) => c.name === 'mfa_challenge')!.value;
    expectError(await secondStep(ctx, undefined, { code: codeNow(ctx, secret) }), 401, 'auth.mfa.missing_challenge');
    expectError(await secondStep(ctx, challenge, { code: codeNow(ctx, secret, 3) }), 401, 'auth.mfa.invalid_code');
    expectError(await secondStep(ctx, challenge, { code: codeNow(ctx, secret), recovery_code: 'aaaaa-aaaaa' }), 400, 'auth.mfa.validation_failed');
    expectError(await secondStep(ctx, challenge, {}), 400, 'auth.mfa.validation_failed');
    const done = await secondStep(ctx, challenge, { code: codeNow(ctx, secret) });
    expect(done.statusCode, done.body).toBe(200);
    const body = done.json() as { user: { id: string }; session_id: string; tokens: { access_token: string } };
    expect(Object.keys(body).sort()).toEqual(['session_id', 'tokens', 'user']);
    expect(body.user.id).toBe(user.id);
    const cookies = ([done.headers['set-cookie']].flat() as string[]);
    expect(cookies).toContain('mfa_challenge=; Max-Age=0; Path=/auth/v0/sign-in/mfa; HttpOnly; Secure; SameSite=Strict');
    expect(decodeJwt(body.tokens.access_token).amr).toEqual(['pwd', 'otp']);
    // The session keeps its amr across refreshes.
    const refreshed = await refresh(ctx, refreshCookieOf(done).value);
    expect(refreshed.statusCode).toBe(200);
    expect(decodeJwt((refreshed.json() as { tokens: { access_token: string } }).tokens.access_token).amr).toEqual(['pwd', 'otp']);
    // The challenge is used up.
    nextStep(ctx);
    expectError(await secondStep(ctx, challenge, { code: codeNow(ctx, secret) }), 401, 'auth.mfa.challenge_expired');
  });

  it('replay: a time step accepted once is refused afterwards, and of two racing requests with one code at most one succeeds', async () => {
    const { user, secret } = await enrolled();
    const code = codeNow(ctx, secret);
    expect((await secondStep(ctx, await passwordStep(ctx, user.username), { code })).statusCode).toBe(200);
    expectError(await secondStep(ctx, await passwordStep(ctx, user.username), { code }), 401, 'auth.mfa.invalid_code');
    // An older step after a newer one was accepted is refused too.
    expectError(await secondStep(ctx, await passwordStep(ctx, user.username), { code: codeNow(ctx, secret, -1) }), 401, 'auth.mfa.invalid_code');
    nextStep(ctx);
    const fresh = codeNow(ctx, secret);
    const challenges = await Promise.all(Array.from({ length: 4 }, () => passwordStep(ctx, user.username)));
    const results = await Promise.all(challenges.map((c) => secondStep(ctx, c, { code: fresh })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 401, 401, 401]);
  });

  it('recovery codes: each signs in once (with amr pwd+otp), in any case and with or without the dash', async () => {
    const { user, recoveryCodes } = await enrolled();
    const [first, second] = recoveryCodes as [string, string];
    const res = await secondStep(ctx, await passwordStep(ctx, user.username), { recovery_code: first.toUpperCase() });
    expect(res.statusCode, res.body).toBe(200);
    expect(decodeJwt((res.json() as { tokens: { access_token: string } }).tokens.access_token).amr).toEqual(['pwd', 'otp']);
    expectError(await secondStep(ctx, await passwordStep(ctx, user.username), { recovery_code: first }), 401, 'auth.mfa.invalid_code');
    expect((await secondStep(ctx, await passwordStep(ctx, user.username), { recovery_code: second.replace('-', '') })).statusCode).toBe(200);
    expectError(await secondStep(ctx, await passwordStep(ctx, user.username), { recovery_code: 'not-a-code' }), 401, 'auth.mfa.invalid_code');
  });

  it('a challenge dies after 5 wrong codes and after 300 s: 401 auth.mfa.challenge_expired, even with the right code', async () => {
    const { user, secret } = await enrolled();
    const challenge = await passwordStep(ctx, user.username);
    for (let i = 0; i < 5; i++) expectError(await secondStep(ctx, challenge, { code: codeNow(ctx, secret, 4) }), 401, 'auth.mfa.invalid_code');
    expectError(await secondStep(ctx, challenge, { code: codeNow(ctx, secret) }), 401, 'auth.mfa.challenge_expired');
    const slow = await passwordStep(ctx, user.username);
    ctx.clock.advance(301);
    expectError(await secondStep(ctx, slow, { code: codeNow(ctx, secret) }), 401, 'auth.mfa.challenge_expired');
    expectError(await secondStep(ctx, 'A'.repeat(43), { code: codeNow(ctx, secret) }), 401, 'auth.mfa.challenge_expired');
  });

  it('the retention worker deletes expired challenges (they hold a copy of the password hash), and keeps live ones', async () => {
    const { user } = await enrolled();
    await passwordStep(ctx, user.username);
    ctx.clock.advance(301);
    const live = await passwordStep(ctx, user.username);
    await ctx.app.retention.runOnce();
    const { rows } = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM mfa_challenges WHERE user_id = $1', [user.id]);
    expect(rows[0]!.n).toBe(1);
    expect(live).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('no path around the second factor: a password reset signs nobody in, and a challenge from before a password change no longer completes', async () => {
    const { user, secret } = await enrolled();
    const challenge = await passwordStep(ctx, user.username);
    expect((await postJson(ctx, '/auth/v0/password-reset', { email: user.email })).statusCode).toBe(204);
    const { code } = await resetCode(ctx, user.email);
    const reset = await postJson(ctx, '/auth/v0/password-reset/confirm', { email: user.email, code, new_password: NEW_PASSWORD });
    expect(reset.statusCode).toBe(204);
    expect(reset.headers['set-cookie']).toBeUndefined();
    expectError(await secondStep(ctx, challenge, { code: codeNow(ctx, secret) }), 401, 'auth.mfa.challenge_expired');
    // The new password still needs the second factor.
    nextStep(ctx);
    expect((await secondStep(ctx, await passwordStep(ctx, user.username, NEW_PASSWORD), { code: codeNow(ctx, secret) })).statusCode).toBe(200);
  });
});

describe('disable and recovery-code regeneration', () => {
  it('disable: 401 for a wrong password or code; with both right, 204, a notice, and the password alone signs in again', async () => {
    const { user, session, secret } = await enrolled();
    const token = session.accessToken;
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/disable', token, { password: 'wrong', code: codeNow(ctx, secret) }), 401, 'auth.invalid_current_password');
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/disable', token, { password: PASSWORD, code: codeNow(ctx, secret, 4) }), 401, 'auth.mfa.invalid_code');
    const res = await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/disable', token, { password: PASSWORD, code: codeNow(ctx, secret) });
    expect(res.statusCode, res.body).toBe(204);
    expect(await noticesTo(ctx, user.email)).toEqual(['mfa_enabled', 'mfa_disabled']);
    const plain = await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: PASSWORD });
    expect(plain.statusCode).toBe(200);
    expect(decodeJwt((plain.json() as { tokens: { access_token: string } }).tokens.access_token).amr).toEqual(['pwd']);
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/disable', token, { password: PASSWORD, code: codeNow(ctx, secret) }), 400, 'auth.mfa.validation_failed');
    const { rows } = await ctx.db.query('SELECT 1 FROM mfa_totp WHERE user_id = $1 UNION ALL SELECT 1 FROM mfa_recovery_codes WHERE user_id = $1', [user.id]);
    expect(rows).toEqual([]);
  });

  it('regeneration with a recovery code as the code: 10 new codes, the old set dead, a notice', async () => {
    const { user, session, recoveryCodes } = await enrolled();
    const res = await withBearer(ctx, 'POST', '/auth/v0/mfa/recovery-codes', session.accessToken, { password: PASSWORD, code: recoveryCodes[0] });
    expect(res.statusCode, res.body).toBe(200);
    const fresh = (res.json() as { recovery_codes: string[] }).recovery_codes;
    expect(fresh).toHaveLength(10);
    expect(fresh.some((c) => recoveryCodes.includes(c))).toBe(false);
    expectError(await secondStep(ctx, await passwordStep(ctx, user.username), { recovery_code: recoveryCodes[1] }), 401, 'auth.mfa.invalid_code');
    expect((await secondStep(ctx, await passwordStep(ctx, user.username), { recovery_code: fresh[0] })).statusCode).toBe(200);
    expect(await noticesTo(ctx, user.email)).toEqual(['mfa_enabled', 'recovery_codes_regenerated']);
  });

  it('regeneration errors: 401 for a wrong password or a wrong code (nothing changes), 400 without TOTP, 401 without a token', async () => {
    const { session, secret, recoveryCodes } = await enrolled();
    const token = session.accessToken;
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/recovery-codes', token, { password: 'wrong', code: codeNow(ctx, secret) }), 401, 'auth.invalid_current_password');
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/recovery-codes', token, { password: PASSWORD, code: 'zzzzz-zzzzz' }), 401, 'auth.mfa.invalid_code');
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/recovery-codes', token, { password: PASSWORD, code: '12345' }), 400, 'auth.mfa.validation_failed');
    expectError(await postJson(ctx, '/auth/v0/mfa/recovery-codes', { password: PASSWORD, code: codeNow(ctx, secret) }), 401, 'auth.missing_access_token');
    // The old set still works: nothing changed.
    const res = await withBearer(ctx, 'POST', '/auth/v0/mfa/recovery-codes', token, { password: PASSWORD, code: recoveryCodes[9] });
    expect(res.statusCode, res.body).toBe(200);
    const other = await createVerifiedUser(ctx);
    const otherSession = await signIn(ctx, { username: other.username, password: PASSWORD });
    expectError(await withBearer(ctx, 'POST', '/auth/v0/mfa/recovery-codes', otherSession.accessToken, { password: PASSWORD, code: '123456' }), 400, 'auth.mfa.validation_failed');
  });

  it('notices arrive with no secret; no secret, code or recovery code reaches the log; metrics count the second steps', async () => {
    const { user, secret, recoveryCodes } = await enrolled();
    const code = codeNow(ctx, secret);
    expect((await secondStep(ctx, await passwordStep(ctx, user.username), { code })).statusCode).toBe(200);
    for (let i = 0; i < 100 && !ctx.smtp.messages.some((m) => m.to.includes(user.email) && /Two-step sign-in was turned on/.test(textOf(m))); i++) await ctx.app.outbox.runOnce();
    const notice = textOf(ctx.smtp.messages.find((m) => m.to.includes(user.email) && /Two-step sign-in was turned on/.test(textOf(m)))!);
    for (const s of [secret, ...recoveryCodes]) expect(notice).not.toContain(s);
    const all = ctx.rawLogs.join('\n');
    for (const s of [secret, code, ...recoveryCodes]) expect(all).not.toContain(s);
    const metrics = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/auth_mfa_sign_in_total\{outcome="totp"\} [1-9]/);
    expect(metrics).toMatch(/auth_mfa_sign_in_total\{outcome="invalid_code"\} [1-9]/);
    expect(metrics).toMatch(/auth_sign_in_total\{outcome="mfa_required"\} [1-9]/);
  });
});

describe('second-step limits per account and per client', () => {
  let limited: TestContext;
  beforeAll(async () => {
    limited = await createTestContext({ RATE_LIMIT_MFA_PER_ACCOUNT: '3', RATE_LIMIT_MFA_PER_IP: '0' }, { startOutboxWorker: false });
  });
  afterAll(async () => limited.close());

  it('wrong codes count per account across challenges: then 429 with Retry-After, for the right code too, until the window ends', async () => {
    const { user, secret } = await enrolled(limited);
    for (let i = 0; i < 3; i++) expectError(await secondStep(limited, await passwordStep(limited, user.username), { code: codeNow(limited, secret, 4) }), 401, 'auth.mfa.invalid_code');
    const res = await secondStep(limited, await passwordStep(limited, user.username), { code: codeNow(limited, secret) });
    expectError(res, 429, 'auth.mfa.too_many_attempts');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    limited.clock.advance(3601);
    expect((await secondStep(limited, await passwordStep(limited, user.username), { code: codeNow(limited, secret) })).statusCode).toBe(200);
  });
});
