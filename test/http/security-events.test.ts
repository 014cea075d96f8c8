import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, postJson, refresh, signIn, withBearer } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '2' });
});
afterAll(async () => ctx.close());

/** The security events logged since `from`. */
const eventsSince = (from: number) => ctx.logs.slice(from).filter((l) => l.securityEvent === true);

describe('security events in the log', () => {
  it('sign-in success, failure and lockout, refresh-token reuse, password change and every revocation are structured events with ids and client IP, never a secret', async () => {
    const from = ctx.logs.length;
    const user = await createVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: user.password });
    const b = await signIn(ctx, { username: user.username, password: user.password });
    const c = await signIn(ctx, { username: user.username, password: user.password });
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: 'wrong password here' })).statusCode).toBe(401);
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: 'wrong password here' })).statusCode).toBe(401);
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: 'wrong password here' })).statusCode).toBe(429);
    const rotated = await refresh(ctx, a.refreshToken);
    expect(rotated.statusCode).toBe(200);
    expect((await refresh(ctx, a.refreshToken)).statusCode).toBe(401);
    expect((await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${c.sessionId}`, b.accessToken)).statusCode).toBe(204);
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', b.accessToken)).statusCode).toBe(204);
    const d = await signIn(ctx, { email: user.email, password: user.password });
    expect((await withBearer(ctx, 'DELETE', '/auth/v0/sessions', d.accessToken)).statusCode).toBe(204);
    const e = await signIn(ctx, { email: user.email, password: user.password });
    const newPassword = 'an entirely new passphrase 7';
    expect((await withBearer(ctx, 'POST', '/auth/v0/change-password', e.accessToken, { current_password: user.password, new_password: newPassword })).statusCode).toBe(204);

    const events = eventsSince(from);
    const find = (event: string, extra: Record<string, unknown> = {}) => events.find((l) => l.event === event && Object.entries(extra).every(([k, v]) => l[k] === v));
    expect(find('sign_in.succeeded', { sessionId: a.sessionId })).toMatchObject({ level: 30, userId: user.id, ip: '127.0.0.1' });
    expect(find('sign_in.failed', { reason: 'wrong_password' })).toMatchObject({ userId: user.id, ip: '127.0.0.1' });
    expect(find('sign_in.locked')).toMatchObject({ level: 40, ip: '127.0.0.1' });
    expect(find('refresh_token.reused')).toMatchObject({ level: 40, userId: user.id, sessionId: a.sessionId, ip: '127.0.0.1' });
    expect(find('session.revoked', { reason: 'revoked_by_user' })).toMatchObject({ userId: user.id, sessionId: c.sessionId, ip: '127.0.0.1' });
    expect(find('session.revoked', { reason: 'logout' })).toMatchObject({ userId: user.id, sessionId: b.sessionId });
    expect(find('session.revoked', { reason: 'revoke_all' })).toMatchObject({ userId: user.id, sessionId: d.sessionId, count: 1 });
    expect(find('password.changed')).toMatchObject({ userId: user.id, sessionId: e.sessionId, ip: '127.0.0.1', count: 1 });

    // Never a secret, in any line of the flow.
    const text = ctx.rawLogs.slice(from).join('\n');
    const refreshed = /refresh_token=([^;]+)/.exec(String(rotated.headers['set-cookie']))![1]!;
    for (const secret of [user.password, newPassword, 'wrong password here', a.accessToken, b.accessToken, a.refreshToken, refreshed, e.refreshToken]) {
      expect(text).not.toContain(secret);
    }
  });
});
