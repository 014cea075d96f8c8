import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { keysOf, PASSWORD, postJson, signUp, uniqueName } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

describe('POST /auth/v0/sign-up', () => {
  it('201 with exactly the User fields, username lower-cased and email normalised', async () => {
    const name = uniqueName('Mixed');
    const res = await postJson(ctx, '/auth/v0/sign-up', { username: name, email: `  ${name}@Example.TEST `, password: PASSWORD });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(keysOf(body)).toEqual(['user']);
    expect(keysOf(body.user)).toEqual(['email', 'id', 'is_email_verified', 'is_phone_verified', 'phone', 'username']);
    expect(body.user).toMatchObject({ username: name.toLowerCase(), email: `${name.toLowerCase()}@example.test`, phone: null, is_email_verified: false, is_phone_verified: false });
    expect(body.user.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('normalises the phone number to +digits', async () => {
    const { res, body } = await signUp(ctx, { email: undefined, phone: '(49) 170-123 4567' });
    expect(res.statusCode).toBe(201);
    expect(body.user).toMatchObject({ email: null });
    expect((body.user as unknown as { phone: string }).phone).toBe('+491701234567');
  });

  it.each([
    ['an unknown member', { extra: 1 }],
    ['neither email nor phone', { email: undefined }],
    ['a short password', { password: 'short' }],
    ['a password of 73 characters', { password: 'x'.repeat(73) }],
    ['a username with a dash', { username: 'bad-name' }],
    ['a 2-character username', { username: 'ab' }],
    ['an invalid email', { email: 'not-an-email' }],
    ['a phone with letters', { email: undefined, phone: '+49abc12345' }],
    ['a phone with too few digits after normalisation', { email: undefined, phone: '+1 (234) 5-6' }],
    ['a number as password', { password: 12345678 }],
  ])('400 auth.sign_up.validation_failed for %s, and nothing is stored', async (_what, overrides) => {
    const username = uniqueName();
    const body: Record<string, unknown> = { username, email: `${username}@example.test`, password: PASSWORD, ...overrides };
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
    const res = await postJson(ctx, '/auth/v0/sign-up', body);
    expect(res.statusCode).toBe(400);
    expect(keysOf(res.json())).toEqual(['code', 'message']);
    expect(res.json().code).toBe('auth.sign_up.validation_failed');
    const { rows } = await ctx.db.query('SELECT 1 FROM users WHERE username = $1', [username.toLowerCase()]);
    expect(rows).toHaveLength(0);
  });

  it('accepts a password of exactly 72 code points, counting astral characters once', async () => {
    // 72 different emoji (144 UTF-16 code units), in no order the password policy calls a sequence.
    const password = Array.from({ length: 72 }, (_, i) => String.fromCodePoint(0x1f600 + ((i * 37) % 80))).join('');
    const { res } = await signUp(ctx, { password });
    expect(res.statusCode).toBe(201);
  });

  it('400 for malformed JSON, a non-JSON content type and an empty body', async () => {
    const bad = await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', headers: { 'content-type': 'application/json' }, payload: '{"username":' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().code).toBe('auth.sign_up.validation_failed');
    const text = await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', headers: { 'content-type': 'text/plain' }, payload: 'hello' });
    expect(text.statusCode).toBe(400);
    expect(text.json().code).toBe('auth.sign_up.validation_failed');
    const empty = await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', headers: { 'content-type': 'application/json' } });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().code).toBe('auth.sign_up.validation_failed');
  });

  it('409 for a taken username (case-insensitively), email and phone', async () => {
    const first = await signUp(ctx, { phone: '+4915112345678' });
    expect(first.res.statusCode).toBe(201);
    const byName = await signUp(ctx, { username: first.request.username.toUpperCase() });
    expect(byName.res.statusCode).toBe(409);
    expect(byName.res.json()).toEqual({ code: 'auth.sign_up.username_taken', message: expect.any(String) });
    const byEmail = await signUp(ctx, { email: first.request.email.toUpperCase() });
    expect(byEmail.res.statusCode).toBe(409);
    expect(byEmail.res.json().code).toBe('auth.sign_up.email_taken');
    const byPhone = await signUp(ctx, { phone: '4915112345678' });
    expect(byPhone.res.statusCode).toBe(409);
    expect(byPhone.res.json().code).toBe('auth.sign_up.phone_taken');
  });

  it('a phone written with the international prefix 00 is the same phone as with +: the second sign-up is 409', async () => {
    const first = await signUp(ctx, { phone: '+15551234567' });
    expect(first.res.statusCode).toBe(201);
    const again = await signUp(ctx, { phone: '0015551234567' });
    expect(again.res.statusCode).toBe(409);
    expect(again.res.json().code).toBe('auth.sign_up.phone_taken');
    const spaced = await signUp(ctx, { phone: '00 1 (555) 123-4567' });
    expect(spaced.res.json().code).toBe('auth.sign_up.phone_taken');
  });

  it('parallel sign-ups with one username give one 201 and the rest 409', async () => {
    const username = uniqueName();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => postJson(ctx, '/auth/v0/sign-up', { username, email: `${username}.${i}@example.test`, password: PASSWORD })),
    );
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
    for (const r of results.filter((x) => x.statusCode === 409)) expect(r.json().code).toBe('auth.sign_up.username_taken');
    const { rows } = await ctx.db.query('SELECT count(*)::int AS n FROM users WHERE username = $1', [username]);
    expect(rows[0]).toEqual({ n: 1 });
  });

  it('stores the password as an argon2id hash and queues the verification email in the outbox', async () => {
    const { body } = await signUp(ctx);
    const { rows } = await ctx.db.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [body.user.id]);
    expect(rows[0]!.password_hash).toMatch(/^\$argon2id\$v=19\$/);
    const outbox = await ctx.db.query<{ status: string; recipient: string }>('SELECT status, recipient FROM email_outbox WHERE recipient = $1', [body.user.email]);
    expect(outbox.rows).toHaveLength(1);
  });
});
