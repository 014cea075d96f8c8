import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, expectError, keysOf, latestCode, PASSWORD, postJson, signUp, uniqueName } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

/** GET /auth/v0/verify-email with the given query members (undefined ones left out). */
function verifyGet(query: Record<string, string | undefined>): Promise<LightMyRequestResponse> {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, v);
  return ctx.app.inject({ method: 'GET', url: `/auth/v0/verify-email?${params.toString()}` });
}

/** POST /auth/v0/verify-email with a JSON body. */
function verifyPost(body: unknown): Promise<LightMyRequestResponse> {
  return postJson(ctx, '/auth/v0/verify-email', body);
}

/** POST /auth/v0/verify-email/resend with a JSON body. */
function resend(body: unknown): Promise<LightMyRequestResponse> {
  return postJson(ctx, '/auth/v0/verify-email/resend', body);
}

/** Signs up a fresh user with an email and returns its id, email and delivered code. */
async function pendingUser(): Promise<{ id: string; email: string; code: string }> {
  const { res, body } = await signUp(ctx);
  expect(res.statusCode).toBe(201);
  const email = body.user.email!;
  return { id: body.user.id, email, code: await latestCode(ctx, email) };
}

async function isEmailVerified(userId: string): Promise<boolean> {
  const { rows } = await ctx.db.query<{ is_email_verified: boolean }>('SELECT is_email_verified FROM users WHERE id = $1', [userId]);
  return rows[0]!.is_email_verified;
}

/** The user's code rows (codes issued at one clock instant have no defined order). */
async function codeRows(userId: string) {
  const { rows } = await ctx.db.query<{ id: string; attempts: number; consumed_at: Date | null; superseded_at: Date | null }>(
    'SELECT id, attempts, consumed_at, superseded_at FROM verification_codes WHERE user_id = $1 ORDER BY created_at, id',
    [userId],
  );
  return rows;
}

async function outboxCount(recipient: string): Promise<number> {
  const { rows } = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM email_outbox WHERE recipient = $1', [recipient]);
  return rows[0]!.n;
}

/** A 6-digit code different from `code`. */
function wrongCode(code: string, offset = 1): string {
  return String((Number(code) + offset) % 1_000_000).padStart(6, '0');
}

function expectNoContent(res: LightMyRequestResponse): void {
  expect(res.statusCode, res.body).toBe(204);
  expect(res.body).toBe('');
}


describe('GET and POST /auth/v0/verify-email', () => {
  it('GET with the right code: 204, empty body, the email becomes verified and sign-in works', async () => {
    const { res, body, request } = await signUp(ctx);
    expect(res.statusCode).toBe(201);
    const email = body.user.email!;
    const code = await latestCode(ctx, email);
    const blocked = await postJson(ctx, '/auth/v0/sign-in', { username: request.username, password: PASSWORD });
    expectError(blocked, 403, 'auth.email_not_verified');

    expectNoContent(await verifyGet({ email, code }));
    expect(await isEmailVerified(body.user.id)).toBe(true);
    const signIn = await postJson(ctx, '/auth/v0/sign-in', { username: request.username, password: PASSWORD });
    expect(signIn.statusCode).toBe(200);
    expect(signIn.json().user.is_email_verified).toBe(true);
  });

  it('POST with a JSON body has the same semantics: 204, empty body, verified (email compared case-insensitively)', async () => {
    const user = await pendingUser();
    expect(await isEmailVerified(user.id)).toBe(false);
    expectNoContent(await verifyPost({ email: user.email.toUpperCase(), code: user.code }));
    expect(await isEmailVerified(user.id)).toBe(true);
    const rows = await codeRows(user.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.consumed_at).not.toBeNull();
  });

  it('an already verified address answers 204 again, in both forms, even with a wrong code', async () => {
    const user = await pendingUser();
    expectNoContent(await verifyPost({ email: user.email, code: user.code }));
    expectNoContent(await verifyGet({ email: user.email, code: user.code }));
    expectNoContent(await verifyPost({ email: user.email, code: user.code }));
    expectNoContent(await verifyGet({ email: user.email, code: wrongCode(user.code) }));
    expect(await isEmailVerified(user.id)).toBe(true);
  });

  it('404 auth.verify_email.user_not_found for an unknown address, body exactly {code, message}', async () => {
    const email = `${uniqueName('nobody')}@example.test`;
    expectError(await verifyGet({ email, code: '123456' }), 404, 'auth.verify_email.user_not_found');
    expectError(await verifyPost({ email, code: '123456' }), 404, 'auth.verify_email.user_not_found');
  });

  it('410 auth.verify_email.code_mismatch for a wrong code; the user stays unverified', async () => {
    const user = await pendingUser();
    expectError(await verifyGet({ email: user.email, code: wrongCode(user.code) }), 410, 'auth.verify_email.code_mismatch');
    expectError(await verifyPost({ email: user.email, code: wrongCode(user.code, 2) }), 410, 'auth.verify_email.code_mismatch');
    expect(await isEmailVerified(user.id)).toBe(false);
    expect((await codeRows(user.id))[0]!.attempts).toBe(2);
  });

  it('410 auth.verify_email.code_expired once VERIFICATION_CODE_TTL_SECONDS have passed (live until then)', async () => {
    const ttl = ctx.config.verificationCodeTtlSeconds;
    expect(ttl).toBe(900);
    const user = await pendingUser();
    ctx.clock.advance(ttl - 1);
    // Still live one second before the end: a wrong code is a mismatch, not an expiry.
    expectError(await verifyPost({ email: user.email, code: wrongCode(user.code) }), 410, 'auth.verify_email.code_mismatch');
    ctx.clock.advance(1);
    expectError(await verifyGet({ email: user.email, code: user.code }), 410, 'auth.verify_email.code_expired');
    expectError(await verifyPost({ email: user.email, code: user.code }), 410, 'auth.verify_email.code_expired');
    expect(await isEmailVerified(user.id)).toBe(false);
  });

  it('5 wrong codes kill the code: then even the right code answers 410 auth.verify_email.too_many_attempts', async () => {
    const user = await pendingUser();
    for (let i = 1; i <= 4; i++) {
      expectError(await verifyPost({ email: user.email, code: wrongCode(user.code, i) }), 410, 'auth.verify_email.code_mismatch');
    }
    // The fifth wrong code is the one that kills it.
    expectError(await verifyGet({ email: user.email, code: wrongCode(user.code, 5) }), 410, 'auth.verify_email.too_many_attempts');
    expectError(await verifyPost({ email: user.email, code: user.code }), 410, 'auth.verify_email.too_many_attempts');
    expectError(await verifyGet({ email: user.email, code: user.code }), 410, 'auth.verify_email.too_many_attempts');
    expect(await isEmailVerified(user.id)).toBe(false);
    expect((await codeRows(user.id))[0]!).toMatchObject({ attempts: 5, consumed_at: null });
  });

  it('50 parallel wrong codes: attempts ends at exactly 5 and the right code afterwards fails', async () => {
    const user = await pendingUser();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => verifyPost({ email: user.email, code: wrongCode(user.code, i + 1) })),
    );
    for (const r of results) expect(r.statusCode).toBe(410);
    expect((await codeRows(user.id))[0]!.attempts).toBe(5);
    expectError(await verifyPost({ email: user.email, code: user.code }), 410, 'auth.verify_email.too_many_attempts');
    expect(await isEmailVerified(user.id)).toBe(false);
    expect((await codeRows(user.id))[0]!).toMatchObject({ attempts: 5, consumed_at: null });
  });

  it('50 parallel wrong codes answer 4 code_mismatch and 46 too_many_attempts (never code_expired for a live code)', async () => {
    const user = await pendingUser();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => verifyPost({ email: user.email, code: wrongCode(user.code, i + 1) })),
    );
    const codes = results.map((r) => (r.json() as { code: string }).code);
    const tally: Record<string, number> = {};
    for (const c of codes) tally[c] = (tally[c] ?? 0) + 1;
    expect(tally).toEqual({ 'auth.verify_email.code_mismatch': 4, 'auth.verify_email.too_many_attempts': 46 });
  });

  it('the right code twice in parallel: both 204, the state changes once (one consumed_at)', async () => {
    const user = await pendingUser();
    const [a, b] = await Promise.all([verifyPost({ email: user.email, code: user.code }), verifyGet({ email: user.email, code: user.code })]);
    expectNoContent(a!);
    expectNoContent(b!);
    expect(await isEmailVerified(user.id)).toBe(true);
    const rows = await codeRows(user.id);
    expect(rows).toHaveLength(1);
    expect(rows.filter((r) => r.consumed_at !== null)).toHaveLength(1);
  });

  it('after 4 wrong codes, the right code twice in parallel still gives 204 twice (right codes use no attempt)', async () => {
    const user = await pendingUser();
    const wrong = user.code === '000000' ? '111111' : '000000';
    for (let i = 0; i < 4; i++) expectError(await verifyPost({ email: user.email, code: wrong }), 410, 'auth.verify_email.code_mismatch');
    const [a, b] = await Promise.all([verifyPost({ email: user.email, code: user.code }), verifyPost({ email: user.email, code: user.code })]);
    expectNoContent(a!);
    expectNoContent(b!);
    expect(await isEmailVerified(user.id)).toBe(true);
  });

  it('after a resend the old code fails with 410 code_mismatch and the new one works', async () => {
    const user = await pendingUser();
    expectNoContent(await resend({ email: user.email }));
    const codeB = await latestCode(ctx, user.email, 2);
    const before = await codeRows(user.id);
    expect(before).toHaveLength(2);
    const superseded = before.filter((r) => r.superseded_at !== null);
    expect(superseded).toHaveLength(1);
    const oldId = superseded[0]!.id;
    if (codeB !== user.code) {
      // The old code is compared with the latest live code, so it is a mismatch (and costs an attempt of code B).
      expectError(await verifyPost({ email: user.email, code: user.code }), 410, 'auth.verify_email.code_mismatch');
      expectError(await verifyGet({ email: user.email, code: user.code }), 410, 'auth.verify_email.code_mismatch');
      expect(await isEmailVerified(user.id)).toBe(false);
    }
    expectNoContent(await verifyPost({ email: user.email, code: codeB }));
    expect(await isEmailVerified(user.id)).toBe(true);
    const after = await codeRows(user.id);
    expect(after.find((r) => r.id === oldId)!.consumed_at).toBeNull();
    expect(after.find((r) => r.id !== oldId)!.consumed_at).not.toBeNull();
  });
});

describe('POST /auth/v0/verify-email/resend', () => {
  it('204 with an empty body for an unknown address, and nothing is queued', async () => {
    const email = `${uniqueName('ghost')}@example.test`;
    expectNoContent(await resend({ email }));
    expect(await outboxCount(email)).toBe(0);
  });

  it('204 with an empty body for an already verified address, and nothing is queued', async () => {
    const user = await createVerifiedUser(ctx);
    expect(await outboxCount(user.email)).toBe(1);
    expectNoContent(await resend({ email: user.email }));
    expect(await outboxCount(user.email)).toBe(1);
    expect(await codeRows(user.id)).toHaveLength(1);
  });

  it('204 for an unverified address queues exactly one new email with a new code', async () => {
    const user = await pendingUser();
    expectNoContent(await resend({ email: user.email }));
    expect(await outboxCount(user.email)).toBe(2);
    expect(await codeRows(user.id)).toHaveLength(2);
  });

  it('a second resend within 60 s answers 429 with Retry-After; after 61 s it answers 204 again', async () => {
    const user = await pendingUser();
    expectNoContent(await resend({ email: user.email }));
    const limited = await resend({ email: user.email });
    expectError(limited, 429, 'auth.resend_verification.too_many_attempts');
    const retryAfter = limited.headers['retry-after'];
    expect(retryAfter).toMatch(/^[0-9]+$/);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(retryAfter)).toBeLessThanOrEqual(60);
    expect(Number(retryAfter)).toBe(60); // the clock has not moved since the first resend
    ctx.clock.advance(30);
    const later = await resend({ email: user.email });
    expectError(later, 429, 'auth.resend_verification.too_many_attempts');
    expect(later.headers['retry-after']).toBe('30');
    expect(await outboxCount(user.email)).toBe(2); // sign-up + the one allowed resend
    ctx.clock.advance(31);
    expectNoContent(await resend({ email: user.email }));
    expect(await outboxCount(user.email)).toBe(3);
  });

  it('the same 429 for an unknown address (no enumeration)', async () => {
    const email = `${uniqueName('ghost')}@example.test`;
    expectNoContent(await resend({ email }));
    const limited = await resend({ email });
    expectError(limited, 429, 'auth.resend_verification.too_many_attempts');
    expect(limited.headers['retry-after']).toBe('60');
    ctx.clock.advance(61);
    expectNoContent(await resend({ email }));
    expect(await outboxCount(email)).toBe(0);
  });
});

describe('validation', () => {
  it.each([
    ['a 5-digit code', { code: '12345' }],
    ['a 7-digit code', { code: '1234567' }],
    ['a non-digit code', { code: '12a456' }],
    ['a missing email', { email: undefined }],
    ['an invalid email', { email: 'not-an-email' }],
    ['a missing code', { code: undefined }],
  ])('GET: 400 auth.verify_email.validation_failed for %s', async (_what, overrides) => {
    const user = await pendingUser();
    const res = await verifyGet({ email: user.email, code: user.code, ...overrides });
    expectError(res, 400, 'auth.verify_email.validation_failed');
    expect(await isEmailVerified(user.id)).toBe(false);
    expect((await codeRows(user.id))[0]!.attempts).toBe(0);
  });

  it.each([
    ['a 5-digit code', { code: '12345' }],
    ['a non-digit code', { code: 'abcdef' }],
    ['a numeric code', { code: 123456 }],
    ['a missing email', { email: undefined }],
    ['an invalid email', { email: 'not-an-email' }],
    ['an unknown body member', { extra: 1 }],
  ])('POST: 400 auth.verify_email.validation_failed for %s', async (_what, overrides) => {
    const user = await pendingUser();
    const body: Record<string, unknown> = { email: user.email, code: user.code, ...overrides };
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
    expectError(await verifyPost(body), 400, 'auth.verify_email.validation_failed');
    expect(await isEmailVerified(user.id)).toBe(false);
    expect((await codeRows(user.id))[0]!.attempts).toBe(0);
  });

  it('POST: 400 auth.verify_email.validation_failed for malformed JSON, a non-JSON content type and an empty body', async () => {
    const bad = await ctx.app.inject({ method: 'POST', url: '/auth/v0/verify-email', headers: { 'content-type': 'application/json' }, payload: '{"email":' });
    expectError(bad, 400, 'auth.verify_email.validation_failed');
    const text = await ctx.app.inject({ method: 'POST', url: '/auth/v0/verify-email', headers: { 'content-type': 'text/plain' }, payload: 'hello' });
    expectError(text, 400, 'auth.verify_email.validation_failed');
    const empty = await ctx.app.inject({ method: 'POST', url: '/auth/v0/verify-email', headers: { 'content-type': 'application/json' } });
    expectError(empty, 400, 'auth.verify_email.validation_failed');
  });

  it.each([
    ['an unknown member', (email: string) => ({ email, extra: 1 })],
    ['an invalid email', () => ({ email: 'not-an-email' })],
    ['a missing email', () => ({})],
  ])('resend: 400 auth.resend_verification.validation_failed for %s, and nothing is queued', async (_what, makeBody) => {
    const user = await pendingUser();
    expectError(await resend(makeBody(user.email)), 400, 'auth.resend_verification.validation_failed');
    expect(await outboxCount(user.email)).toBe(1);
    // The rejected request did not use up the address's resend allowance.
    expectNoContent(await resend({ email: user.email }));
  });

  it('resend: 400 auth.resend_verification.validation_failed for malformed JSON', async () => {
    const bad = await ctx.app.inject({ method: 'POST', url: '/auth/v0/verify-email/resend', headers: { 'content-type': 'application/json' }, payload: '{' });
    expectError(bad, 400, 'auth.resend_verification.validation_failed');
  });
});

describe('codes at rest', () => {
  it('the code is stored hashed: it never appears in verification_codes (nor in the log)', async () => {
    const user = await pendingUser();
    expectNoContent(await resend({ email: user.email }));
    const codeB = await latestCode(ctx, user.email, 2);
    const { rows } = await ctx.db.query<{ row: string; code_hash: string }>(
      'SELECT v::text AS row, code_hash FROM verification_codes v WHERE user_id = $1',
      [user.id],
    );
    expect(rows).toHaveLength(2);
    for (const r of rows) {
      expect(r.row).not.toContain(user.code);
      expect(r.row).not.toContain(codeB);
      expect(r.code_hash).toMatch(/^[A-Za-z0-9_-]{43}$/);
    }
    expect(rows[0]!.code_hash).not.toBe(rows[1]!.code_hash);
    // A GET carries the code in its query string: the request log must not.
    expectNoContent(await verifyGet({ email: user.email, code: codeB }));
    for (const line of ctx.rawLogs) {
      expect(line).not.toContain(`code=${codeB}`);
      expect(line).not.toContain(`code=${user.code}`);
    }
  });
});
