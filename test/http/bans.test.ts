import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unbanUser } from '../../src/modules/users/users.repo.js';
import { banUser } from '../../src/modules/users/users.service.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { expectError, insertVerifiedUser, PASSWORD, postJson, refresh, setCookies, signIn, withBearer } from '../helpers/flows.js';
import { codeNow, enrolled, passwordStep, secondStep } from '../helpers/mfa.js';
import { passkeySignIn, withPasskey } from '../helpers/passkeys.js';

/**
 * Bans on the public side (docs/api.md, admin API: "Bans"): a ban revokes every session in its
 * transaction; while it is in force every sign-in method answers 403 `auth.user_banned` once
 * the first credential checked out (a wrong password stays 401), and no refresh or Bearer
 * request of the user succeeds; a ban with an end stops by itself; an unban restores sign-in
 * but not the revoked sessions. The ban is set with the repository functions the admin API and
 * the CLI call.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ RATE_LIMIT_MFA_PER_ACCOUNT: '0', RATE_LIMIT_MFA_PER_IP: '0' }, { startOutboxWorker: false });
});
afterAll(async () => ctx.close());


const ban = (userId: string, until: Date | null = null) => ctx.db.transaction((tx) => banUser(tx, userId, { until, reason: 'spam' }, ctx.clock.now()));
const signInWith = (username: string, password = PASSWORD) => postJson(ctx, '/auth/v0/sign-in', { username, password });

describe('a ban in force', () => {
  it('revokes every session at once; Bearer and refresh fail; a right password answers 403 auth.user_banned, a wrong one 401, and no cookie is set', async () => {
    const user = await insertVerifiedUser(ctx);
    const first = await signIn(ctx, { username: user.username, password: PASSWORD });
    const second = await signIn(ctx, { username: user.username, password: PASSWORD });
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', first.accessToken)).statusCode).toBe(200);

    const result = await ban(user.id);
    expect(result?.sessionsRevoked).toBe(2);
    expect(result?.ban).toEqual({ banned_at: ctx.clock.now(), banned_until: null, ban_reason: 'spam' });
    const { rows } = await ctx.db.query<{ revoked_reason: string | null }>('SELECT revoked_reason FROM sessions WHERE user_id = $1', [user.id]);
    expect(rows.map((r) => r.revoked_reason)).toEqual(['banned', 'banned']);

    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', first.accessToken), 401, 'auth.invalid_access_token');
    expectError(await refresh(ctx, second.refreshToken), 401, 'auth.invalid_refresh_token');
    expectError(await signInWith(user.username, 'not the password at all'), 401, 'auth.invalid_credentials');
    const refused = await signInWith(user.username);
    expectError(refused, 403, 'auth.user_banned');
    expect(setCookies(refused)).toEqual([]);
    const { rows: after } = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [user.id]);
    expect(after[0]!.n).toBe(2);
    expect(ctx.logs.some((l) => l.event === 'sign_in.failed' && l.userId === user.id && l.reason === 'banned')).toBe(true);
  });

  it('the Bearer check itself refuses a banned user whose session was not revoked (no extra round trip: the session statement reads the ban)', async () => {
    const user = await insertVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    // Only the ban columns, as a ban that raced the sign-in would leave them before its revocation.
    await ctx.db.query('UPDATE users SET banned_at = $2 WHERE id = $1', [user.id, ctx.clock.now()]);
    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken), 401, 'auth.invalid_access_token');
    await ctx.db.query('UPDATE users SET banned_at = NULL WHERE id = $1', [user.id]);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(200);
  });

  it('a passkey sign-in answers 403 auth.user_banned once the assertion verified', async () => {
    const { user, authenticator } = await withPasskey(ctx);
    await ban(user.id);
    const { res } = await passkeySignIn(ctx, authenticator);
    expectError(res, 403, 'auth.user_banned');
    expect(setCookies(res).filter((c) => c.name === 'refresh_token')).toEqual([]);
  });

  it('a passkey sign-in checks the ban first, as every sign-in does: a banned user with an unverified email is told of the ban, and the signature counter does not move', async () => {
    const { user, authenticator } = await withPasskey(ctx);
    await ctx.db.query('UPDATE users SET is_email_verified = false WHERE id = $1', [user.id]);
    await ban(user.id);
    const counter = async () => (await ctx.db.query<{ counter: number }>('SELECT counter::int AS counter FROM passkeys WHERE user_id = $1', [user.id])).rows[0]!.counter;
    const before = await counter();
    const { res } = await passkeySignIn(ctx, authenticator);
    expectError(res, 403, 'auth.user_banned');
    expect(await counter()).toBe(before);
  });

  it('the second step checks the account again: an email made unverified after the password step answers 403 auth.email_not_verified, no session', async () => {
    const { user, secret } = await enrolled(ctx);
    const challenge = await passwordStep(ctx, user.username);
    await ctx.db.query('UPDATE users SET is_email_verified = false WHERE id = $1', [user.id]);
    const sessions = async () => (await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [user.id])).rows[0]!.n;
    const before = await sessions(); // the one the enrolment signed in with
    expectError(await secondStep(ctx, challenge, { code: codeNow(ctx, secret) }), 403, 'auth.email_not_verified');
    expect(await sessions()).toBe(before);
  });

  it('with a second factor: the password step answers 403 auth.user_banned, and a challenge from before the ban does not complete', async () => {
    const { user, secret } = await enrolled(ctx);
    const challenge = await passwordStep(ctx, user.username);
    await ban(user.id);
    expectError(await signInWith(user.username), 403, 'auth.user_banned');
    expectError(await secondStep(ctx, challenge, { code: codeNow(ctx, secret) }), 403, 'auth.user_banned');
    const { rows } = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1 AND revoked_at IS NULL', [user.id]);
    expect(rows[0]!.n).toBe(0);
  });
});

describe('the end of a ban', () => {
  it('a ban with an end stops by itself at that instant', async () => {
    const user = await insertVerifiedUser(ctx);
    await ban(user.id, new Date(ctx.clock.now().getTime() + 3_600_000));
    expectError(await signInWith(user.username), 403, 'auth.user_banned');
    ctx.clock.advance(3_599);
    expectError(await signInWith(user.username), 403, 'auth.user_banned');
    ctx.clock.advance(1);
    expect((await signInWith(user.username)).statusCode).toBe(200);
    // It had run out: lifting it now lifts nothing.
    expect(await ctx.db.transaction((tx) => unbanUser(tx, user.id, ctx.clock.now()))).toEqual({ lifted: false });
  });

  it('an unban restores sign-in but not the sessions the ban revoked; a second unban lifts nothing; a new ban replaces the one in force', async () => {
    const user = await insertVerifiedUser(ctx);
    const before = await signIn(ctx, { username: user.username, password: PASSWORD });
    await ban(user.id, new Date(ctx.clock.now().getTime() + 60_000));
    await ban(user.id); // indefinite now
    ctx.clock.advance(120);
    expectError(await signInWith(user.username), 403, 'auth.user_banned');

    expect(await ctx.db.transaction((tx) => unbanUser(tx, user.id, ctx.clock.now()))).toEqual({ lifted: true });
    expect(await ctx.db.transaction((tx) => unbanUser(tx, user.id, ctx.clock.now()))).toEqual({ lifted: false });
    expect(await unbanUser(ctx.db, '00000000-0000-4000-8000-000000000000', ctx.clock.now())).toBeUndefined();
    expect((await signInWith(user.username)).statusCode).toBe(200);
    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', before.accessToken), 401, 'auth.invalid_access_token');
    expectError(await refresh(ctx, before.refreshToken), 401, 'auth.invalid_refresh_token');
    const { rows } = await ctx.db.query('SELECT banned_at, banned_until, ban_reason FROM users WHERE id = $1', [user.id]);
    expect(rows[0]).toEqual({ banned_at: null, banned_until: null, ban_reason: null });
  });
});

describe('a user without a password', () => {
  it('password sign-in answers 401 auth.invalid_credentials, as for a wrong password, and sets last_sign_in_at only on a session', async () => {
    const user = await insertVerifiedUser(ctx);
    await ctx.db.query('UPDATE users SET password_hash = NULL WHERE id = $1', [user.id]);
    expectError(await signInWith(user.username), 401, 'auth.invalid_credentials');
    expect(ctx.logs.some((l) => l.event === 'sign_in.failed' && l.userId === user.id && l.reason === 'no_password')).toBe(true);
    const { rows } = await ctx.db.query<{ last_sign_in_at: Date | null }>('SELECT last_sign_in_at FROM users WHERE id = $1', [user.id]);
    expect(rows[0]!.last_sign_in_at).toBeNull();
  });

  it('a sign-in records last_sign_in_at', async () => {
    const user = await insertVerifiedUser(ctx);
    ctx.clock.advance(7);
    await signIn(ctx, { username: user.username, password: PASSWORD });
    const { rows } = await ctx.db.query<{ last_sign_in_at: Date | null }>('SELECT last_sign_in_at FROM users WHERE id = $1', [user.id]);
    expect(rows[0]!.last_sign_in_at).toEqual(ctx.clock.now());
  });
});
