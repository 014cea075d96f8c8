import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseCommandIo } from '../../src/cli-support.js';
import { createLogger } from '../../src/app.js';
import { runUsersCommand } from '../../src/modules/accounts/accounts.cli.js';
import { runSessionsCommand } from '../../src/modules/sessions/sessions.cli.js';
import { createRetentionWorker } from '../../src/modules/retention/retention.worker.js';
import { banUser } from '../../src/modules/users/users.service.js';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook } from '../../packages/verify/src/webhook.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, emailChangeCode, latestCode, PASSWORD, postJson, refresh, resetCode, signIn, signUp, withBearer } from '../helpers/flows.js';
import { codeNow, enrolled, passwordStep, secondStep } from '../helpers/mfa.js';
import { passkeySignIn, withPasskey } from '../helpers/passkeys.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * Every event type the service records (docs/api.md#event-types), caused through HTTP (or the
 * CLI and the retention worker, for what they do), delivered to a real receiver on 127.0.0.1,
 * with exactly the `data` members the table lists, and signed so that both the
 * `standardwebhooks` package and @latchkey/verify accept it. An event exists if and only if its
 * change committed: refused and rolled-back changes leave none.
 */

const UA = 'webhook-events-test/1';
const NEW_PASSWORD = 'a different horse battery staple';

let ctx: TestContext;
let receiver: WebhookReceiver;
let secret: string;
const work = mkdtempSync(path.join(tmpdir(), 'auth-webhook-events-'));

beforeAll(async () => {
  ctx = await createTestContext({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { startWebhookWorker: false });
  receiver = await startWebhookReceiver();
  ({ secret } = await ctx.app.webhooks.add({ url: receiver.url(), eventTypes: ['*'] }));
});
afterAll(async () => {
  await ctx?.close();
  await receiver?.close();
  rmSync(work, { recursive: true, force: true });
});

/** Delivers every recorded event (the worker's rounds until one claims nothing). */
async function deliverAll(): Promise<void> {
  while ((await ctx.app.webhookDelivery.runOnce()) > 0);
}

/** The events delivered so far that concern `userId`, in the order they were recorded (their ids are UUIDv7s). */
async function eventsOf(userId: string): Promise<{ type: string; data: Record<string, unknown> }[]> {
  await deliverAll();
  const mine = receiver.received.filter((r) => r.json.data.user_id === userId || (r.json.data.user as { id?: string } | undefined)?.id === userId);
  return [...mine]
    .sort((a, b) => String(a.headers['webhook-id']).localeCompare(String(b.headers['webhook-id'])))
    .map((r) => ({ type: r.json.type, data: r.json.data }));
}

/** Requests with a known User-Agent, so that `user_agent` is checked exactly. */
const post = (url: string, body: unknown, headers: Record<string, string> = {}) => postJson(ctx, url, body, { 'user-agent': UA, ...headers });
const bearer = (method: 'POST' | 'DELETE', url: string, token: string, payload?: unknown) =>
  ctx.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}`, 'user-agent': UA, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });
const signInUa = (username: string, password = PASSWORD) => signIn(ctx, { username, password }, { 'user-agent': UA });

/** The wire User of a user as the service stores it now. */
async function userNow(id: string): Promise<Record<string, unknown>> {
  const { rows } = await ctx.db.query('SELECT id, username, email, phone, is_email_verified, is_phone_verified FROM users WHERE id = $1', [id]);
  return rows[0]!;
}

/** Runs an operator command in-process on the test database and clock. */
async function cli(run: (argv: string[], io: DatabaseCommandIo) => Promise<number>, argv: string[]): Promise<number> {
  return run(argv, {
    env: { DATA_DIR: path.join(work, 'data'), LOG_LEVEL: 'silent' },
    stdout: () => {},
    stderr: () => {},
    openDatabase: async () => ({ ...ctx.db, close: async () => {} }),
    clock: ctx.clock,
  });
}

describe('every event type, with exactly its data members', () => {
  it('user.created, user.email_verified, session.created, session.revoked (logout, revoked_by_user, revoke_all)', async () => {
    const { body } = await signUp(ctx);
    const id = body.user.id;
    const email = body.user.email!;
    const created = await userNow(id);
    expect(await eventsOf(id)).toEqual([{ type: 'user.created', data: { user: created } }]);

    expect((await post('/auth/v0/verify-email', { email, code: await latestCode(ctx, email) })).statusCode).toBe(204);
    const verified = await userNow(id);
    expect(verified.is_email_verified).toBe(true);

    const s1 = await signInUa(body.user.username);
    const s2 = await signInUa(body.user.username);
    const s3 = await signInUa(body.user.username);
    const s4 = await signInUa(body.user.username);
    expect((await bearer('POST', '/auth/v0/logout', s1.accessToken)).statusCode).toBe(204);
    expect((await bearer('DELETE', `/auth/v0/sessions/${s2.sessionId}`, s3.accessToken)).statusCode).toBe(204);
    expect((await bearer('DELETE', '/auth/v0/sessions', s3.accessToken)).statusCode).toBe(204);

    const created1 = (sessionId: string) => ({ type: 'session.created', data: { user_id: id, session_id: sessionId, amr: ['pwd'], ip: '127.0.0.1', user_agent: UA } });
    const revoked = (sessionId: string, cause: string) => ({ type: 'session.revoked', data: { user_id: id, session_id: sessionId, cause } });
    const events = await eventsOf(id);
    expect(events.slice(0, 6)).toEqual([
      { type: 'user.created', data: { user: created } },
      { type: 'user.email_verified', data: { user: verified } },
      created1(s1.sessionId),
      created1(s2.sessionId),
      created1(s3.sessionId),
      created1(s4.sessionId),
    ]);
    expect(events.slice(6, 8)).toEqual([revoked(s1.sessionId, 'logout'), revoked(s2.sessionId, 'revoked_by_user')]);
    // One event per session the revoke-all revoked, in any order.
    expect(events.slice(8)).toHaveLength(2);
    expect(events.slice(8)).toEqual(expect.arrayContaining([revoked(s3.sessionId, 'revoke_all'), revoked(s4.sessionId, 'revoke_all')]));
  });

  it('refresh_token.reuse_detected with the presenting request, and session.revoked (refresh_token_reuse); a refresh records nothing', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signInUa(user.username);
    const first = await refresh(ctx, s.refreshToken);
    expect(first.statusCode).toBe(200);
    const before = (await eventsOf(user.id)).length;
    const reuse = await ctx.app.inject({ method: 'POST', url: '/auth/v0/refresh', headers: { cookie: `refresh_token=${s.refreshToken}`, 'user-agent': 'thief/2' } });
    expect(reuse.json()).toMatchObject({ code: 'auth.refresh_token_reused' });
    const events = (await eventsOf(user.id)).slice(before);
    expect(events).toEqual([
      { type: 'session.revoked', data: { user_id: user.id, session_id: s.sessionId, cause: 'refresh_token_reuse' } },
      { type: 'refresh_token.reuse_detected', data: { user_id: user.id, session_id: s.sessionId, ip: '127.0.0.1', user_agent: 'thief/2' } },
    ]);
  });

  it('password.changed (change_password) with session.revoked (password_changed) per session', async () => {
    const user = await createVerifiedUser(ctx);
    const a = await signInUa(user.username);
    const b = await signInUa(user.username);
    const before = (await eventsOf(user.id)).length;
    expect((await bearer('POST', '/auth/v0/change-password', a.accessToken, { current_password: PASSWORD, new_password: NEW_PASSWORD })).statusCode).toBe(204);
    const events = (await eventsOf(user.id)).slice(before);
    expect(events).toHaveLength(3);
    expect(events).toEqual(
      expect.arrayContaining([
        { type: 'session.revoked', data: { user_id: user.id, session_id: a.sessionId, cause: 'password_changed' } },
        { type: 'session.revoked', data: { user_id: user.id, session_id: b.sessionId, cause: 'password_changed' } },
        { type: 'password.changed', data: { user_id: user.id, via: 'change_password' } },
      ]),
    );
  });

  it('password.changed (reset), user.email_verified when the reset verified the email, session.revoked (password_reset)', async () => {
    // A user whose email is unverified (so it cannot sign in yet): a reset code sent to it proves it.
    const { body } = await signUp(ctx);
    const id = body.user.id;
    const email = body.user.email!;
    const before = (await eventsOf(id)).length;
    expect((await post('/auth/v0/password-reset', { email })).statusCode).toBe(204);
    const { code } = await resetCode(ctx, email);
    expect((await post('/auth/v0/password-reset/confirm', { email, code, new_password: NEW_PASSWORD })).statusCode).toBe(204);
    expect((await eventsOf(id)).slice(before)).toEqual([
      { type: 'password.changed', data: { user_id: id, via: 'reset' } },
      { type: 'user.email_verified', data: { user: await userNow(id) } },
    ]);

    // Signed in now; a second reset revokes the session, and the email is verified already.
    const s = await signInUa(body.user.username, NEW_PASSWORD);
    const signedIn = (await eventsOf(id)).length;
    ctx.clock.advance(61);
    expect((await post('/auth/v0/password-reset', { email })).statusCode).toBe(204);
    const again = await resetCode(ctx, email, 2);
    expect((await post('/auth/v0/password-reset/confirm', { email, code: again.code, new_password: PASSWORD })).statusCode).toBe(204);
    expect((await eventsOf(id)).slice(signedIn)).toEqual([
      { type: 'session.revoked', data: { user_id: id, session_id: s.sessionId, cause: 'password_reset' } },
      { type: 'password.changed', data: { user_id: id, via: 'reset' } },
    ]);
  });

  it('user.updated with the members that changed (an email change)', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signInUa(user.username);
    const before = (await eventsOf(user.id)).length;
    const newEmail = `new_${user.username}@example.test`;
    expect((await bearer('POST', '/auth/v0/change-email', s.accessToken, { new_email: newEmail, password: PASSWORD })).statusCode).toBe(204);
    const code = await emailChangeCode(ctx, newEmail);
    expect((await bearer('POST', '/auth/v0/change-email/confirm', s.accessToken, { code })).statusCode).toBe(200);
    expect((await eventsOf(user.id)).slice(before)).toEqual([{ type: 'user.updated', data: { user: await userNow(user.id), changed: ['email'] } }]);

    // Adding an email to a phone-only account changes two members.
    const { body } = await signUp(ctx, { email: undefined, phone: `+1666${String(Date.now() % 10_000_000).padStart(7, '0')}` });
    const phoneOnly = await signInUa(body.user.username);
    const added = `added_${body.user.username}@example.test`;
    expect((await bearer('POST', '/auth/v0/change-email', phoneOnly.accessToken, { new_email: added, password: PASSWORD })).statusCode).toBe(204);
    const code2 = await emailChangeCode(ctx, added);
    expect((await bearer('POST', '/auth/v0/change-email/confirm', phoneOnly.accessToken, { code: code2 })).statusCode).toBe(200);
    const events = await eventsOf(body.user.id);
    expect(events.at(-1)).toEqual({ type: 'user.updated', data: { user: await userNow(body.user.id), changed: ['email', 'is_email_verified'] } });
  });

  it('mfa.enabled, session.created of the second step (amr pwd, otp), mfa.disabled', async () => {
    const { user, session, secret: totp } = await enrolled(ctx);
    const challenge = await passwordStep(ctx, user.username);
    const step = await secondStep(ctx, challenge, { code: codeNow(ctx, totp) });
    expect(step.statusCode, step.body).toBe(200);
    const stepSession = (step.json() as { session_id: string }).session_id;
    ctx.clock.advance(30);
    expect((await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/disable', session.accessToken, { password: PASSWORD, code: codeNow(ctx, totp) })).statusCode).toBe(204);
    const events = (await eventsOf(user.id)).filter((e) => e.type.startsWith('mfa.') || e.type === 'session.created');
    expect(events).toEqual([
      { type: 'session.created', data: { user_id: user.id, session_id: session.sessionId, amr: ['pwd'], ip: '127.0.0.1', user_agent: 'lightMyRequest' } },
      { type: 'mfa.enabled', data: { user_id: user.id } },
      { type: 'session.created', data: { user_id: user.id, session_id: stepSession, amr: ['pwd', 'otp'], ip: '127.0.0.1', user_agent: 'lightMyRequest' } },
      { type: 'mfa.disabled', data: { user_id: user.id } },
    ]);
  });

  it('passkey.added, session.created of a passkey sign-in, passkey.removed', async () => {
    const { user, session, authenticator, passkey } = await withPasskey(ctx);
    const signedIn = await passkeySignIn(ctx, authenticator);
    expect(signedIn.res.statusCode, signedIn.res.body).toBe(200);
    const passkeySession = (signedIn.res.json() as { session_id: string }).session_id;
    expect((await withBearer(ctx, 'DELETE', `/auth/v0/passkeys/${passkey.id}`, session.accessToken)).statusCode).toBe(204);
    const events = (await eventsOf(user.id)).filter((e) => e.type.startsWith('passkey.') || e.data.session_id === passkeySession);
    expect(events).toEqual([
      { type: 'passkey.added', data: { user_id: user.id, passkey_id: passkey.id } },
      { type: 'session.created', data: { user_id: user.id, session_id: passkeySession, amr: ['hwk', 'user'], ip: '127.0.0.1', user_agent: 'lightMyRequest' } },
      { type: 'passkey.removed', data: { user_id: user.id, passkey_id: passkey.id } },
    ]);
  });

  it('user.deleted (owner): the only event of a deletion, none for its sessions or passkeys', async () => {
    const { user, session } = await withPasskey(ctx);
    await signInUa(user.username);
    const before = (await eventsOf(user.id)).length;
    expect((await withBearer(ctx, 'POST', '/auth/v0/delete-account', session.accessToken, { password: PASSWORD })).statusCode).toBe(204);
    expect((await eventsOf(user.id)).slice(before)).toEqual([{ type: 'user.deleted', data: { user_id: user.id, cause: 'owner' } }]);
  });

  it('user.deleted (operator) by `latchkey users delete`, session.revoked (operator) by `latchkey sessions revoke`', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signInUa(user.username);
    const before = (await eventsOf(user.id)).length;
    expect(await cli(runSessionsCommand, ['revoke', '--user', user.username])).toBe(0);
    expect(await cli(runUsersCommand, ['delete', '--user', user.id])).toBe(0);
    expect((await eventsOf(user.id)).slice(before)).toEqual([
      { type: 'session.revoked', data: { user_id: user.id, session_id: s.sessionId, cause: 'operator' } },
      { type: 'user.deleted', data: { user_id: user.id, cause: 'operator' } },
    ]);
  });

  it('user.deleted (unverified_expired): one event per expired user, also when the retention worker deletes them in batches', async () => {
    const users = await Promise.all([signUp(ctx), signUp(ctx), signUp(ctx)]);
    const ids = users.map((u) => u.body.user.id);
    await ctx.db.query(`UPDATE users SET created_at = created_at - interval '30 days' WHERE id = ANY($1::uuid[])`, [ids]);
    const worker = createRetentionWorker({
      db: ctx.db,
      clock: ctx.clock,
      log: createLogger('silent'),
      retention: ctx.config.retention,
      refreshReuseGraceSeconds: 0,
      unverifiedAccountTtlSeconds: ctx.config.unverifiedAccountTtlSeconds,
      batches: { sessionBatchSize: 2, pauseMs: 0 },
    });
    expect((await worker.runOnce()).unverifiedUsers).toBeGreaterThanOrEqual(3);
    for (const id of ids) expect((await eventsOf(id)).at(-1)).toEqual({ type: 'user.deleted', data: { user_id: id, cause: 'unverified_expired' } });
  });

  it('session.revoked (banned): one per session a ban revokes', async () => {
    const user = await createVerifiedUser(ctx);
    const a = await signInUa(user.username);
    const b = await signInUa(user.username);
    const before = (await eventsOf(user.id)).length;
    await ctx.db.transaction((tx) => banUser(tx, user.id, { until: null, reason: null }, ctx.clock.now()));
    const events = (await eventsOf(user.id)).slice(before);
    expect(events).toHaveLength(2);
    expect(events).toEqual(
      expect.arrayContaining([
        { type: 'session.revoked', data: { user_id: user.id, session_id: a.sessionId, cause: 'banned' } },
        { type: 'session.revoked', data: { user_id: user.id, session_id: b.sessionId, cause: 'banned' } },
      ]),
    );
  });

  it('every delivery verifies with the standardwebhooks package and with @latchkey/verify, and is {type, timestamp, data} exactly', async () => {
    await deliverAll();
    expect(receiver.received.length).toBeGreaterThan(30);
    const wh = new Webhook(secret);
    for (const r of receiver.received as ReceivedWebhook[]) {
      const headers = { 'webhook-id': String(r.headers['webhook-id']), 'webhook-timestamp': String(r.headers['webhook-timestamp']), 'webhook-signature': String(r.headers['webhook-signature']) };
      expect(wh.verify(r.body, headers)).toEqual(r.json);
      // The test clock moved (code steps, rate windows): verify at the attempt's own time.
      const now = new Date(Number(headers['webhook-timestamp']) * 1000);
      expect(verifyWebhook({ secret, headers: r.headers as Record<string, string>, body: r.body, now }).event).toEqual(r.json);
      expect(Object.keys(r.json)).toEqual(['type', 'timestamp', 'data']);
      expect(r.headers['content-type']).toBe('application/json');
    }
  });
});

describe('an event exists if and only if its change committed', () => {
  /** The events recorded for `userId` (delivered or not). */
  const recorded = async (userId: string): Promise<string[]> => {
    const { rows } = await ctx.db.query<{ type: string }>(
      `SELECT type FROM webhook_events WHERE data->>'user_id' = $1 OR data->'user'->>'id' = $1 ORDER BY id`,
      [userId],
    );
    return rows.map((r) => r.type);
  };

  it('refused requests record nothing: a taken username, a wrong current password, a banned user\'s sign-in', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signInUa(user.username);
    const before = await recorded(user.id);
    expect((await signUp(ctx, { username: user.username })).res.statusCode).toBe(409);
    expect((await bearer('POST', '/auth/v0/change-password', s.accessToken, { current_password: 'not the password', new_password: NEW_PASSWORD })).statusCode).toBe(401);
    await ctx.db.query('UPDATE users SET banned_at = $2 WHERE id = $1', [user.id, ctx.clock.now()]);
    expect((await post('/auth/v0/sign-in', { username: user.username, password: PASSWORD })).statusCode).toBe(403);
    await ctx.db.query('UPDATE users SET banned_at = NULL WHERE id = $1', [user.id]);
    expect(await recorded(user.id)).toEqual(before);
  });

  it('a change whose transaction fails after its events were written leaves none: the password, the sessions and the events roll back together', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signInUa(user.username);
    const before = await recorded(user.id);
    // The last statement of a password change queues its notice; make exactly that one fail.
    await ctx.db.exec(`
      CREATE FUNCTION fail_notice() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'notice refused by the test'; END $$;
      CREATE TRIGGER fail_notice BEFORE INSERT ON email_outbox FOR EACH ROW WHEN (NEW.kind = 'notice') EXECUTE FUNCTION fail_notice();`);
    try {
      const res = await bearer('POST', '/auth/v0/change-password', s.accessToken, { current_password: PASSWORD, new_password: NEW_PASSWORD });
      expect(res.statusCode).toBe(500);
    } finally {
      await ctx.db.exec('DROP TRIGGER fail_notice ON email_outbox; DROP FUNCTION fail_notice();');
    }
    expect(await recorded(user.id)).toEqual(before);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(200);
    // The same change, committed this time, records its events.
    expect((await bearer('POST', '/auth/v0/change-password', s.accessToken, { current_password: PASSWORD, new_password: NEW_PASSWORD })).statusCode).toBe(204);
    expect((await recorded(user.id)).slice(before.length).sort()).toEqual(['password.changed', 'session.revoked']);
  });
});
