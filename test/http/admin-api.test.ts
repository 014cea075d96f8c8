/**
 * The admin API (docs/admin-api.md) through HTTP, on the same buildApp as production with
 * ADMIN_PORT set: its own listener (the public one never answers an admin path), API keys and
 * their checks in the documented order, every users, sessions and audit route with its statuses
 * and codes, the audit log written in the transaction of each change (none for a refusal, a
 * no-op or a rollback), bans enforced at once, and keyset pagination that walks every user
 * exactly once while users come and go (a property test).
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/db/db.js';
import { createAdminKey, type AdminScope } from '../../src/modules/admin/admin-keys.service.js';
import { adminRequest } from '../helpers/admin.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, expectError, keysOf, PASSWORD, postJson, refresh, resetCode, signIn, uniqueName, withBearer } from '../helpers/flows.js';
import { mailsTo, mailText } from '../helpers/mail.js';
import { enrolled, passwordStep } from '../helpers/mfa.js';
import { withPasskey } from '../helpers/passkeys.js';

/** The per-key limit of this file: low enough to reach in a test, each test making its own keys. */
const KEY_LIMIT = 40;
const ALL_SCOPES: AdminScope[] = ['users:read', 'users:write', 'sessions:write', 'audit:read'];

let ctx: TestContext;
let admin: FastifyInstance;
/** A key with every scope but `webhooks`, for requests whose key is not the point. */
let key: string;
let keyId: string;

beforeAll(async () => {
  ctx = await createTestContext({ ADMIN_PORT: '0', RATE_LIMIT_ADMIN_PER_KEY: String(KEY_LIMIT) }, { startOutboxWorker: false });
  admin = ctx.app.admin!;
  ({ key, id: keyId } = await newKey(ALL_SCOPES));
});
afterAll(async () => ctx?.close());
// Each test starts in a fresh window of the per-key rate limit.
beforeEach(() => ctx.clock.advance(60));

/** A new key with these scopes (`expiresAt` null: none). */
async function newKey(scopes: AdminScope[], expiresAt: Date | null = null): Promise<{ id: string; key: string }> {
  return createAdminKey(ctx.db, { name: uniqueName('key'), scopes, expiresAt, now: ctx.clock.now() });
}

/** One admin request with `key` (or none) and a JSON body when given. */
function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, options: { key?: string | null; body?: unknown; headers?: Record<string, string> } = {}): Promise<LightMyRequestResponse> {
  return adminRequest(admin, method, url, { ...options, key: options.key === undefined ? key : options.key });
}

/** The audit entries about `userId`, newest first, straight from the table. */
async function auditOf(userId: string, q: Queryable = ctx.db): Promise<{ action: string; key_id: string | null; key_name: string; details: Record<string, unknown> }[]> {
  const { rows } = await q.query<{ action: string; key_id: string | null; key_name: string; details: Record<string, unknown> }>(
    'SELECT action, key_id, key_name, details FROM admin_audit_log WHERE user_id = $1 ORDER BY at DESC, id DESC',
    [userId],
  );
  return rows;
}

const ADMIN_USER_MEMBERS = [
  'ban_reason', 'banned', 'banned_until', 'created_at', 'email', 'has_password', 'id', 'identities', 'is_email_verified',
  'is_phone_verified', 'last_sign_in_at', 'mfa_enabled', 'passkeys', 'phone', 'username',
];

describe('the admin listener', () => {
  it('the public listener never answers an admin path, whatever the key', async () => {
    for (const url of ['/admin/v0/users', '/admin/v0/openapi.json', '/admin/v0/docs', '/admin', `/admin/v0/users/${randomUUID()}`]) {
      const res = await ctx.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } });
      expectError(res, 404, 'request.not_found');
    }
    expectError(await ctx.app.inject({ method: 'POST', url: '/admin/v0/users', headers: { authorization: `Bearer ${key}` }, payload: {} }), 404, 'request.not_found');
  });

  it('serves only /admin/v0: the public routes, probes and other paths answer 404 admin.not_found', async () => {
    for (const url of ['/auth/v0/me', '/auth/v0/.well-known/jwks.json', '/healthz', '/metrics', '/', '/admin', '/admin/v1/users']) {
      expectError(await call('GET', url), 404, 'admin.not_found');
    }
  });

  it('an unknown admin path is checked for a key first (401), then answered 404 admin.not_found; so is a route with another method', async () => {
    expectError(await call('GET', '/admin/v0/nope', { key: null }), 401, 'admin.invalid_api_key');
    expectError(await call('GET', '/admin/v0/nope'), 404, 'admin.not_found');
    expectError(await call('PATCH', '/admin/v0/users'), 404, 'admin.not_found');
    expectError(await call('GET', '/admin/v0/webhooks/x/y'), 404, 'admin.not_found');
  });

  it('is for servers: no CORS (a preflight is refused), no cookies, no-store, and a request id on every answer', async () => {
    const preflight = await admin.inject({
      method: 'OPTIONS',
      url: '/admin/v0/users',
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'GET' },
    });
    // No route answers OPTIONS: the preflight meets the key check of an unknown admin path.
    expectError(preflight, 401, 'admin.invalid_api_key');
    expect(Object.keys(preflight.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    const res = await call('GET', '/admin/v0/users?limit=1', { headers: { origin: 'https://app.example.com' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(Object.keys(res.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    expect(res.headers['set-cookie']).toBeUndefined();
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
  });
});

describe('API keys (docs/admin-api.md#api-keys)', () => {
  it('no key, another scheme, a malformed, unknown, wrong, revoked or expired key: 401 admin.invalid_api_key, the same answer', async () => {
    const { id, key: live } = await newKey(['users:read']);
    const revoked = await newKey(['users:read']);
    await ctx.db.query('UPDATE admin_api_keys SET revoked_at = $2 WHERE id = $1', [revoked.id, ctx.clock.now()]);
    const expired = await newKey(['users:read'], new Date(ctx.clock.now().getTime() - 1000));
    const unknown = live.replace(id.replaceAll('-', ''), randomUUID().replaceAll('-', ''));
    const wrong = `${live.slice(0, -8)}${live.endsWith('AAAAAAAA') ? 'BBBBBBBB' : 'AAAAAAAA'}`;
    const bodies = new Set<string>();
    for (const authorization of [undefined, '', `Basic ${live}`, 'Bearer lk_admin_nope', `Bearer ${unknown}`, `Bearer ${wrong}`, `Bearer ${revoked.key}`, `Bearer ${expired.key}`, `Bearer ${live}x`]) {
      const res = await admin.inject({ method: 'GET', url: '/admin/v0/users', headers: authorization === undefined ? {} : { authorization } });
      expectError(res, 401, 'admin.invalid_api_key');
      bodies.add(res.body);
    }
    expect(bodies.size).toBe(1);
    expect((await call('GET', '/admin/v0/users?limit=1', { key: live })).statusCode).toBe(200);
    expect((await call('GET', '/admin/v0/users?limit=1', { key: `${live.slice(0, 9).toUpperCase()}${live.slice(9)}` })).statusCode).toBe(401);
  });

  it('an unknown key and a wrong key cost the same: one statement, a SHA-256 and a constant-time comparison each', async () => {
    const { id, key: live } = await newKey(['users:read']);
    const unknown = live.replace(id.replaceAll('-', ''), randomUUID().replaceAll('-', ''));
    const wrong = `${live.slice(0, -4)}${live.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    const statements = async (k: string): Promise<string[]> => {
      const seen: string[] = [];
      const query = ctx.db.query.bind(ctx.db);
      ctx.db.query = ((sql: string, params?: readonly unknown[]) => {
        seen.push(sql.replace(/\s+/g, ' ').trim());
        return query(sql, params);
      }) as typeof ctx.db.query;
      try {
        expectError(await call('GET', '/admin/v0/users', { key: k }), 401, 'admin.invalid_api_key');
      } finally {
        ctx.db.query = query;
      }
      return seen;
    };
    const forUnknown = await statements(unknown);
    const forWrong = await statements(wrong);
    expect(forUnknown).toHaveLength(1);
    expect(forWrong).toEqual(forUnknown);
    expect(forUnknown[0]).toMatch(/FROM admin_api_keys WHERE id = \$1$/);
  });

  it('keys are stored only as a hash', async () => {
    const { id, key: live } = await newKey(['users:read']);
    const { rows } = await ctx.db.query<Record<string, unknown>>('SELECT * FROM admin_api_keys WHERE id = $1', [id]);
    expect(JSON.stringify(rows)).not.toContain(live.slice(-43));
    expect(rows[0]!.key_hash).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('a missing scope is 403 admin.insufficient_scope, checked after the key and before the body, query and path', async () => {
    const { key: reader } = await newKey(['users:read']);
    const { key: writer } = await newKey(['users:write']);
    expectError(await call('POST', '/admin/v0/users', { key: reader, body: { nonsense: true } }), 403, 'admin.insufficient_scope');
    expectError(await call('POST', '/admin/v0/users', { key: null, body: { nonsense: true } }), 401, 'admin.invalid_api_key');
    expectError(await call('DELETE', '/admin/v0/users/not-a-uuid/sessions', { key: writer }), 403, 'admin.insufficient_scope');
    expectError(await call('GET', '/admin/v0/users?limit=0', { key: writer }), 403, 'admin.insufficient_scope');
    expectError(await call('GET', '/admin/v0/audit', { key: reader }), 403, 'admin.insufficient_scope');
    expectError(await call('GET', '/admin/v0/users/not-a-uuid', { key: reader }), 400, 'admin.validation_failed');
    expectError(await call('GET', `/admin/v0/users/${randomUUID()}`, { key: reader }), 404, 'admin.user_not_found');
  });

  it('every route needs its scope: users:read, users:write, sessions:write, audit:read', async () => {
    const id = randomUUID();
    const routes: [AdminScope, 'GET' | 'POST' | 'PATCH' | 'DELETE', string][] = [
      ['users:read', 'GET', '/admin/v0/users'],
      ['users:read', 'GET', `/admin/v0/users/${id}`],
      ['users:read', 'GET', `/admin/v0/users/${id}/sessions`],
      ['users:write', 'POST', '/admin/v0/users'],
      ['users:write', 'PATCH', `/admin/v0/users/${id}`],
      ['users:write', 'DELETE', `/admin/v0/users/${id}`],
      ['users:write', 'POST', `/admin/v0/users/${id}/ban`],
      ['users:write', 'POST', `/admin/v0/users/${id}/unban`],
      ['users:write', 'POST', `/admin/v0/users/${id}/password-reset`],
      ['users:write', 'POST', `/admin/v0/users/${id}/mfa/reset`],
      ['sessions:write', 'DELETE', `/admin/v0/users/${id}/sessions`],
      ['sessions:write', 'DELETE', `/admin/v0/users/${id}/sessions/${randomUUID()}`],
      ['audit:read', 'GET', '/admin/v0/audit'],
    ];
    const others = await newKey(['webhooks']);
    for (const [scope, method, url] of routes) {
      expectError(await call(method, url, { key: others.key }), 403, 'admin.insufficient_scope');
      const only = await newKey([scope]);
      const res = await call(method, url, { key: only.key });
      expect([200, 400, 404], `${method} ${url}: ${res.body}`).toContain(res.statusCode);
    }
  });

  it('last_used_at is written at the first use, then at most once a minute', async () => {
    const { id, key: k } = await newKey(['users:read']);
    const lastUsed = async (): Promise<number | null> =>
      (await ctx.db.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM admin_api_keys WHERE id = $1', [id])).rows[0]!.last_used_at?.getTime() ?? null;
    expect(await lastUsed()).toBeNull();
    const first = ctx.clock.now().getTime();
    expect((await call('GET', '/admin/v0/users?limit=1', { key: k })).statusCode).toBe(200);
    expect(await lastUsed()).toBe(first);
    ctx.clock.advance(59);
    expect((await call('GET', '/admin/v0/users?limit=1', { key: k })).statusCode).toBe(200);
    expect(await lastUsed()).toBe(first);
    ctx.clock.advance(1);
    expect((await call('GET', '/admin/v0/users?limit=1', { key: k })).statusCode).toBe(200);
    expect(await lastUsed()).toBe(first + 60_000);
    // A refused request (401) is no use of the key.
    ctx.clock.advance(120);
    expectError(await call('GET', '/admin/v0/users', { key: `${k.slice(0, -4)}${k.endsWith('AAAA') ? 'BBBB' : 'AAAA'}` }), 401, 'admin.invalid_api_key');
    expect(await lastUsed()).toBe(first + 60_000);
  });

  it(`a key gets RATE_LIMIT_ADMIN_PER_KEY requests a minute (here ${KEY_LIMIT}), then 429 admin.too_many_requests with Retry-After; other keys go on`, async () => {
    ctx.clock.advance(60); // a fresh window
    const { key: busy } = await newKey(['users:read']);
    for (let i = 0; i < KEY_LIMIT; i++) expect((await call('GET', `/admin/v0/users/${randomUUID()}`, { key: busy })).statusCode).toBe(404);
    const refused = await call('GET', '/admin/v0/users?limit=1', { key: busy });
    expectError(refused, 429, 'admin.too_many_requests');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect((await call('GET', '/admin/v0/users?limit=1')).statusCode).toBe(200);
    ctx.clock.advance(60);
    expect((await call('GET', '/admin/v0/users?limit=1', { key: busy })).statusCode).toBe(200);
  });
});

describe('users (docs/admin-api.md#users)', () => {
  it('GET /users/{id}: exactly the AdminUser members, with the second factor, passkeys and last sign-in; any case of the id', async () => {
    const { user } = await withPasskey(ctx);
    const res = await call('GET', `/admin/v0/users/${user.id.toUpperCase()}`);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as Record<string, unknown>;
    expect(keysOf(body)).toEqual(ADMIN_USER_MEMBERS);
    expect(body).toEqual({
      id: user.id,
      username: user.username,
      email: user.email,
      phone: null,
      is_email_verified: true,
      is_phone_verified: false,
      created_at: expect.stringMatching(/Z$/),
      last_sign_in_at: ctx.clock.now().toISOString(),
      has_password: true,
      mfa_enabled: false,
      passkeys: 1,
      identities: [],
      banned: false,
      banned_until: null,
      ban_reason: null,
    });
    const { user: second } = await enrolled(ctx);
    expect((await call('GET', `/admin/v0/users/${second.id}`)).json()).toMatchObject({ mfa_enabled: true, passkeys: 0 });
    // Identities at identity providers, oldest first, as {provider, email}.
    for (const [provider, email, ageSeconds] of [['github', null, 10], ['google', 'alice@gmail.example', 20]] as const) {
      await ctx.db.query(
        'INSERT INTO user_identities (id, user_id, provider, issuer, subject, email, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [randomUUID(), second.id, provider, `https://${provider}.example`, randomUUID(), email, new Date(ctx.clock.now().getTime() - ageSeconds * 1000)],
      );
    }
    expect((await call('GET', `/admin/v0/users/${second.id}`)).json()).toMatchObject({ identities: [{ provider: 'google', email: 'alice@gmail.example' }, { provider: 'github', email: null }] });
  });

  it('every change records its event in its transaction: user.created, user.updated, user.banned, user.unbanned, session.revoked, mfa.disabled, user.deleted', async () => {
    const events = async (userId: string): Promise<{ type: string; data: Record<string, unknown> }[]> =>
      (await ctx.db.query<{ type: string; data: Record<string, unknown> }>("SELECT type, data FROM webhook_events WHERE data->>'user_id' = $1 OR data->'user'->>'id' = $1 ORDER BY id", [userId])).rows;
    const name = uniqueName('ev');
    const made = (await call('POST', '/admin/v0/users', { body: { username: name, email: `${name}@example.test`, password: PASSWORD, is_email_verified: true } })).json() as { id: string };
    ctx.clock.advance(1);
    await call('PATCH', `/admin/v0/users/${made.id}`, { body: { phone: '+447700900321' } });
    const session = await signIn(ctx, { username: name, password: PASSWORD });
    ctx.clock.advance(1);
    await call('POST', `/admin/v0/users/${made.id}/ban`, { body: { reason: 'spam' } });
    ctx.clock.advance(1);
    await call('POST', `/admin/v0/users/${made.id}/unban`);
    await call('POST', `/admin/v0/users/${made.id}/unban`);
    ctx.clock.advance(1);
    await call('DELETE', `/admin/v0/users/${made.id}`);
    // Events of one instant (the ban and the revocation it makes) have no order among themselves.
    expect((await events(made.id)).map((e) => e.type).sort()).toEqual(['session.created', 'session.revoked', 'user.banned', 'user.created', 'user.deleted', 'user.unbanned', 'user.updated']);
    const byType = Object.fromEntries((await events(made.id)).map((e) => [e.type, e.data]));
    expect(byType['user.updated']).toMatchObject({ changed: ['phone'] });
    expect(byType['user.banned']).toEqual({ user_id: made.id, banned_until: null, reason: 'spam' });
    expect(byType['session.revoked']).toEqual({ user_id: made.id, session_id: session.sessionId, cause: 'banned' });
    expect(byType['user.deleted']).toEqual({ user_id: made.id, cause: 'operator' });

    const { user } = await enrolled(ctx);
    ctx.clock.advance(1);
    await call('POST', `/admin/v0/users/${user.id}/mfa/reset`);
    await call('POST', `/admin/v0/users/${user.id}/mfa/reset`);
    expect((await events(user.id)).map((e) => e.type).filter((t) => t.startsWith('mfa.'))).toEqual(['mfa.enabled', 'mfa.disabled']);
  });

  it('POST /users applies the sign-up rules, sends no email, and records user.create without the password', async () => {
    const name = uniqueName('Made');
    const res = await call('POST', '/admin/v0/users', { body: { username: name, email: ` ${name.toUpperCase()}@Example.TEST `, phone: '+44 20 7946 0' + String(Math.floor(Math.random() * 900) + 100), password: 'plum tractor velvet harbour' } });
    expect(res.statusCode, res.body).toBe(201);
    const made = res.json() as Record<string, unknown>;
    expect(keysOf(made)).toEqual(ADMIN_USER_MEMBERS);
    expect(made).toMatchObject({ username: name.toLowerCase(), email: `${name.toLowerCase()}@example.test`, phone: expect.stringMatching(/^\+44207946\d{4}$/), is_email_verified: false, has_password: true, last_sign_in_at: null });
    await ctx.app.outbox.runOnce();
    expect(ctx.smtp.messages.filter((m) => m.to.includes(`${name.toLowerCase()}@example.test`))).toEqual([]);
    const entries = await auditOf(made.id as string);
    expect(entries).toEqual([{ action: 'user.create', key_id: keyId, key_name: expect.any(String), details: { username: name.toLowerCase(), has_password: true } }]);
    expect(JSON.stringify(entries)).not.toContain('plum');
    // Unverified email: password sign-in answers as for any unverified account.
    expectError(await postJson(ctx, '/auth/v0/sign-in', { username: name, password: 'plum tractor velvet harbour' }), 403, 'auth.email_not_verified');
  });

  it('POST /users without a password makes a user who has none; is_email_verified true lets it in by a reset', async () => {
    const name = uniqueName('nopw');
    const res = await call('POST', '/admin/v0/users', { body: { username: name, email: `${name}@example.test`, is_email_verified: true } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ has_password: false, is_email_verified: true });
    expectError(await postJson(ctx, '/auth/v0/sign-in', { username: name, password: PASSWORD }), 401, 'auth.invalid_credentials');
  });

  it.each([
    ['no email and no phone', { username: 'someone_new' }, /email or phone is required/],
    ['an unknown member', { username: 'someone_new', email: 'a@example.test', role: 'admin' }, /unknown member "role"/],
    ['a password the policy refuses', { username: 'someone_new', email: 'a@example.test', password: 'password123' }, /password/],
    ['a short password', { username: 'someone_new', email: 'a@example.test', password: 'short' }, /password must be 8 to 72 characters/],
    ['a bad username', { username: 'no spaces', email: 'a@example.test' }, /username must be 3 to 32/],
    ['a phone with too few digits', { username: 'someone_new', phone: '+1 234' }, /phone/],
    ['is_email_verified without an email', { username: 'someone_new', phone: '+447700900123', is_email_verified: true }, /is_email_verified needs an email/],
    ['a number for a string', { username: 12345, email: 'a@example.test' }, /username must be a string/],
  ])('POST /users with %s: 400 admin.validation_failed, nothing created', async (_name, body, message) => {
    const res = await call('POST', '/admin/v0/users', { body });
    expectError(res, 400, 'admin.validation_failed');
    expect((res.json() as { message: string }).message).toMatch(message);
    expect((await ctx.db.query("SELECT 1 FROM users WHERE username = 'someone_new'")).rows).toEqual([]);
  });

  it('POST /users with a taken username, email or phone: 409 admin.*_taken, nothing recorded', async () => {
    const taken = await createVerifiedUser(ctx, { phone: '+447700900555' });
    const before = (await ctx.db.query('SELECT count(*)::int AS n FROM admin_audit_log')).rows[0];
    expectError(await call('POST', '/admin/v0/users', { body: { username: taken.username.toUpperCase(), email: 'new_one@example.test' } }), 409, 'admin.username_taken');
    expectError(await call('POST', '/admin/v0/users', { body: { username: uniqueName(), email: taken.email.toUpperCase() } }), 409, 'admin.email_taken');
    expectError(await call('POST', '/admin/v0/users', { body: { username: uniqueName(), phone: '+44 7700 900555', password: PASSWORD } }), 409, 'admin.phone_taken');
    expect((await ctx.db.query('SELECT count(*)::int AS n FROM admin_audit_log')).rows[0]).toEqual(before);
  });

  it('PATCH /users/{id}: a new email is unverified unless the request says so; phone may go while email stays; a no-op records nothing', async () => {
    const user = await createVerifiedUser(ctx);
    const email = `${uniqueName('moved')}@example.test`;
    let res = await call('PATCH', `/admin/v0/users/${user.id}`, { body: { email: email.toUpperCase() } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ email, is_email_verified: false });
    ctx.clock.advance(1);
    res = await call('PATCH', `/admin/v0/users/${user.id}`, { body: { is_email_verified: true, phone: '447700900777' } });
    expect(res.json()).toMatchObject({ email, is_email_verified: true, phone: '+447700900777', is_phone_verified: false });
    ctx.clock.advance(1);
    res = await call('PATCH', `/admin/v0/users/${user.id}`, { body: { email: null, is_phone_verified: true } });
    expect(res.json()).toMatchObject({ email: null, is_email_verified: false, phone: '+447700900777', is_phone_verified: true });
    expect((await auditOf(user.id)).map((e) => [e.action, e.details])).toEqual([
      ['user.update', { changed: ['email', 'is_email_verified', 'is_phone_verified'] }],
      ['user.update', { changed: ['phone', 'is_email_verified'] }],
      ['user.update', { changed: ['email', 'is_email_verified'] }],
    ]);
    res = await call('PATCH', `/admin/v0/users/${user.id}`, { body: { username: user.username.toUpperCase() } });
    expect(res.statusCode).toBe(200);
    res = await call('PATCH', `/admin/v0/users/${user.id}`);
    expect(res.statusCode, res.body).toBe(400);
    res = await call('PATCH', `/admin/v0/users/${user.id}`, { body: {} });
    expect(res.statusCode).toBe(200);
    expect(await auditOf(user.id)).toHaveLength(3);
  });

  it('PATCH /users/{id} refuses what sign-up refuses, and a user without email or phone; 404 for an unknown user', async () => {
    const user = await createVerifiedUser(ctx);
    const other = await createVerifiedUser(ctx);
    expectError(await call('PATCH', `/admin/v0/users/${user.id}`, { body: { email: null } }), 400, 'admin.validation_failed');
    expectError(await call('PATCH', `/admin/v0/users/${user.id}`, { body: { is_phone_verified: true } }), 400, 'admin.validation_failed');
    expectError(await call('PATCH', `/admin/v0/users/${user.id}`, { body: { email: other.email } }), 409, 'admin.email_taken');
    expectError(await call('PATCH', `/admin/v0/users/${user.id}`, { body: { username: other.username } }), 409, 'admin.username_taken');
    expectError(await call('PATCH', `/admin/v0/users/${user.id}`, { body: { password: 'new password here' } }), 400, 'admin.validation_failed');
    expectError(await call('PATCH', `/admin/v0/users/${randomUUID()}`, { body: { username: 'whoever' } }), 404, 'admin.user_not_found');
    expect(await auditOf(user.id)).toEqual([]);
    expect((await call('GET', `/admin/v0/users/${user.id}`)).json()).toMatchObject({ email: user.email, username: user.username });
  });

  it('DELETE /users/{id} does what account deletion does: tokens dead, identifiers free, a notice from "an operator"; user.delete recorded once', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const res = await call('DELETE', `/admin/v0/users/${user.id}`);
    expect(res.statusCode, res.body).toBe(204);
    expect(res.body).toBe('');
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(401);
    expect((await refresh(ctx, session.refreshToken)).statusCode).toBe(401);
    const text = mailText((await mailsTo(ctx, user.email, 2)).at(-1)!);
    expect(text).toContain('Subject: Your account was deleted');
    expect(text).toContain('From: an operator of the service');
    expect(await auditOf(user.id)).toEqual([{ action: 'user.delete', key_id: keyId, key_name: expect.any(String), details: { username: user.username } }]);
    expectError(await call('DELETE', `/admin/v0/users/${user.id}`), 404, 'admin.user_not_found');
    expectError(await call('GET', `/admin/v0/users/${user.id}`), 404, 'admin.user_not_found');
    expect(await auditOf(user.id)).toHaveLength(1);
    expect((await postJson(ctx, '/auth/v0/sign-up', { username: user.username, email: user.email, password: PASSWORD })).statusCode).toBe(201);
  });

  it('operations without a request take no body or {}; a member is refused', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await call('POST', `/admin/v0/users/${user.id}/unban`)).statusCode).toBe(200);
    expect((await call('POST', `/admin/v0/users/${user.id}/unban`, { body: {} })).statusCode).toBe(200);
    const res = await call('POST', `/admin/v0/users/${user.id}/unban`, { body: { now: true } });
    expectError(res, 400, 'admin.validation_failed');
    expect(res.json()).toMatchObject({ message: 'unknown member "now"' });
    expectError(await call('DELETE', `/admin/v0/users/${user.id}/sessions`, { body: { all: true } }), 400, 'admin.validation_failed');
    expectError(await admin.inject({ method: 'POST', url: `/admin/v0/users/${user.id}/unban`, headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, payload: 'x' }), 400, 'admin.validation_failed');
    // A JSON null is a body, not an absent one: a ban is not made indefinite by it.
    const nullBan = await admin.inject({ method: 'POST', url: `/admin/v0/users/${user.id}/ban`, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, payload: 'null' });
    expectError(nullBan, 400, 'admin.validation_failed');
    expect((await call('GET', `/admin/v0/users/${user.id}`)).json()).toMatchObject({ banned: false });
  });
});

describe('bans (docs/admin-api.md#ban-a-user)', () => {
  it('a ban ends every session at once and refuses sign-in; unban restores sign-in but not the sessions', async () => {
    const user = await createVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: PASSWORD });
    const b = await signIn(ctx, { username: user.username, password: PASSWORD });
    const res = await call('POST', `/admin/v0/users/${user.id}/ban`, { body: { reason: 'spam' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ banned: true, banned_until: null, ban_reason: 'spam' });
    const { rows } = await ctx.db.query<{ revoked_reason: string }>('SELECT revoked_reason FROM sessions WHERE user_id = $1', [user.id]);
    expect(rows.map((r) => r.revoked_reason)).toEqual(['banned', 'banned']);
    for (const s of [a, b]) {
      expect((await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(401);
      expect((await refresh(ctx, s.refreshToken)).statusCode).toBe(401);
    }
    expectError(await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: PASSWORD }), 403, 'auth.user_banned');
    expectError(await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: 'wrong password!' }), 401, 'auth.invalid_credentials');
    expect(await auditOf(user.id)).toEqual([{ action: 'user.ban', key_id: keyId, key_name: expect.any(String), details: { until: null, reason: 'spam', sessions_revoked: 2 } }]);

    ctx.clock.advance(1);
    const lifted = await call('POST', `/admin/v0/users/${user.id}/unban`);
    expect(lifted.statusCode, lifted.body).toBe(200);
    expect(lifted.json()).toMatchObject({ banned: false, banned_until: null, ban_reason: null });
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', a.accessToken)).statusCode).toBe(401);
    await signIn(ctx, { username: user.username, password: PASSWORD });
    // An unban of a user who is not banned answers as usual and records nothing.
    expect((await call('POST', `/admin/v0/users/${user.id}/unban`)).json()).toMatchObject({ banned: false });
    expect((await auditOf(user.id)).map((e) => e.action)).toEqual(['user.unban', 'user.ban']);
  });

  it('a ban until a time ends then, without an unban; a new ban replaces the one in force; until must be in the future', async () => {
    const user = await createVerifiedUser(ctx);
    const until = new Date(ctx.clock.now().getTime() + 3600_000).toISOString();
    let res = await call('POST', `/admin/v0/users/${user.id}/ban`, { body: { until } });
    expect(res.json()).toMatchObject({ banned: true, banned_until: until, ban_reason: null });
    const later = new Date(ctx.clock.now().getTime() + 7200_000).toISOString();
    res = await call('POST', `/admin/v0/users/${user.id}/ban`, { body: { until: later, reason: 'again' } });
    expect(res.json()).toMatchObject({ banned: true, banned_until: later, ban_reason: 'again' });
    for (const bad of [ctx.clock.now().toISOString(), '2000-01-01T00:00:00Z', 'tomorrow', '2099-13-01T00:00:00Z']) {
      expectError(await call('POST', `/admin/v0/users/${user.id}/ban`, { body: { until: bad } }), 400, 'admin.validation_failed');
    }
    expectError(await call('POST', `/admin/v0/users/${user.id}/ban`, { body: { reason: '' } }), 400, 'admin.validation_failed');
    expectError(await call('POST', `/admin/v0/users/${user.id}/ban`, { body: { reason: 'x'.repeat(501) } }), 400, 'admin.validation_failed');
    expectError(await call('POST', `/admin/v0/users/${randomUUID()}/ban`), 404, 'admin.user_not_found');
    expect((await auditOf(user.id)).map((e) => e.action)).toEqual(['user.ban', 'user.ban']);
    ctx.clock.advance(7201);
    expect((await call('GET', `/admin/v0/users/${user.id}`)).json()).toMatchObject({ banned: false, banned_until: null, ban_reason: null });
    await signIn(ctx, { username: user.username, password: PASSWORD });
    // The ban ran out: an unban lifts nothing and records nothing.
    await call('POST', `/admin/v0/users/${user.id}/unban`);
    expect(await auditOf(user.id)).toHaveLength(2);
  });
});

describe('password reset and second factor (docs/admin-api.md)', () => {
  it('password-reset queues the reset email, without the per-address limit; user.password_reset recorded, no code in it', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await call('POST', `/admin/v0/users/${user.id}/password-reset`)).statusCode).toBe(204);
    const first = await resetCode(ctx, user.email);
    expect((await call('POST', `/admin/v0/users/${user.id}/password-reset`)).statusCode).toBe(204);
    const second = await resetCode(ctx, user.email, 2);
    const confirm = await postJson(ctx, '/auth/v0/password-reset/confirm', { email: user.email, code: second.code, new_password: 'plum tractor velvet harbour' });
    expect(confirm.statusCode, confirm.body).toBe(204);
    const entries = await auditOf(user.id);
    expect(entries.map((e) => e.action)).toEqual(['user.password_reset', 'user.password_reset']);
    expect(JSON.stringify(entries)).not.toContain(first.code);
    expect(JSON.stringify(entries)).not.toContain(second.code);
  });

  it('password-reset of a user without email: 409 admin.no_email, nothing recorded', async () => {
    const name = uniqueName('phone');
    const made = (await call('POST', '/admin/v0/users', { body: { username: name, phone: '+447700900' + String(Math.floor(Math.random() * 900) + 100) } })).json() as { id: string };
    expectError(await call('POST', `/admin/v0/users/${made.id}/password-reset`), 409, 'admin.no_email');
    expectError(await call('POST', `/admin/v0/users/${randomUUID()}/password-reset`), 404, 'admin.user_not_found');
    expect((await auditOf(made.id)).map((e) => e.action)).toEqual(['user.create']);
  });

  it('mfa/reset removes TOTP and the recovery codes with the notice; sign-in no longer asks for a code; a second reset does nothing', async () => {
    const { user, recoveryCodes } = await enrolled(ctx);
    await passwordStep(ctx, user.username);
    expect((await call('POST', `/admin/v0/users/${user.id}/mfa/reset`)).statusCode).toBe(204);
    expect((await ctx.db.query('SELECT 1 FROM mfa_recovery_codes WHERE user_id = $1', [user.id])).rows).toEqual([]);
    expect((await call('GET', `/admin/v0/users/${user.id}`)).json()).toMatchObject({ mfa_enabled: false });
    await signIn(ctx, { username: user.username, password: PASSWORD });
    const notice = (await mailsTo(ctx, user.email, 3)).map(mailText).find((t) => t.includes('Subject: Two-step sign-in was turned off'));
    expect(notice).toContain('From: an operator of the service');
    expect((await call('POST', `/admin/v0/users/${user.id}/mfa/reset`)).statusCode).toBe(204);
    const entries = await auditOf(user.id);
    expect(entries.map((e) => e.action)).toEqual(['user.mfa_reset']);
    expect(JSON.stringify(entries)).not.toContain(recoveryCodes[0]!);
    expectError(await call('POST', `/admin/v0/users/${randomUUID()}/mfa/reset`), 404, 'admin.user_not_found');
  });
});

describe('sessions (docs/admin-api.md#sessions)', () => {
  it('lists the active sessions without current; ends one (only of that user), then all; no-ops record nothing', async () => {
    const user = await createVerifiedUser(ctx);
    const other = await createVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: PASSWORD }, { 'user-agent': 'Agent A' });
    const b = await signIn(ctx, { username: user.username, password: PASSWORD });
    const c = await signIn(ctx, { username: user.username, password: PASSWORD });
    const foreign = await signIn(ctx, { username: other.username, password: PASSWORD });
    let res = await call('GET', `/admin/v0/users/${user.id}/sessions`);
    expect(res.statusCode, res.body).toBe(200);
    const sessions = (res.json() as { sessions: Record<string, unknown>[] }).sessions;
    expect(sessions.map((s) => s.id).sort()).toEqual([a.sessionId, b.sessionId, c.sessionId].sort());
    expect(keysOf(sessions[0])).toEqual(['created_at', 'device_id', 'expires_at', 'id', 'ip', 'last_used_at', 'user_agent']);
    expect(sessions.find((s) => s.id === a.sessionId)).toMatchObject({ user_agent: 'Agent A', ip: '127.0.0.1' });

    expectError(await call('DELETE', `/admin/v0/users/${user.id}/sessions/${foreign.sessionId}`), 404, 'admin.not_found');
    expectError(await call('DELETE', `/admin/v0/users/${user.id}/sessions/${randomUUID()}`), 404, 'admin.not_found');
    expectError(await call('DELETE', `/admin/v0/users/${user.id}/sessions/nope`), 400, 'admin.validation_failed');
    expectError(await call('DELETE', `/admin/v0/users/${randomUUID()}/sessions/${a.sessionId}`), 404, 'admin.user_not_found');
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', foreign.accessToken)).statusCode).toBe(200);

    expect((await call('DELETE', `/admin/v0/users/${user.id}/sessions/${a.sessionId.toUpperCase()}`)).statusCode).toBe(204);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', a.accessToken)).statusCode).toBe(401);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', b.accessToken)).statusCode).toBe(200);
    expect((await call('DELETE', `/admin/v0/users/${user.id}/sessions/${a.sessionId}`)).statusCode).toBe(204);

    ctx.clock.advance(1);
    expect((await call('DELETE', `/admin/v0/users/${user.id}/sessions`)).statusCode).toBe(204);
    for (const s of [b, c]) expect((await refresh(ctx, s.refreshToken)).statusCode).toBe(401);
    expect((await call('GET', `/admin/v0/users/${user.id}/sessions`)).json()).toEqual({ sessions: [] });
    expect((await call('DELETE', `/admin/v0/users/${user.id}/sessions`)).statusCode).toBe(204);
    expect((await auditOf(user.id)).map((e) => [e.action, e.details])).toEqual([
      ['sessions.revoke_all', { sessions_revoked: 2 }],
      ['sessions.revoke', { session_id: a.sessionId }],
    ]);
    expectError(await call('GET', `/admin/v0/users/${randomUUID()}/sessions`), 404, 'admin.user_not_found');
    expectError(await call('DELETE', `/admin/v0/users/${randomUUID()}/sessions`), 404, 'admin.user_not_found');
  });
});

describe('the audit log (docs/admin-api.md#audit-log)', () => {
  it('an entry has exactly its members: the key, the client address, the X-Request-Id of the answer', async () => {
    const user = await createVerifiedUser(ctx);
    const res = await call('POST', `/admin/v0/users/${user.id}/ban`, { headers: { 'x-request-id': 'req-4711' } });
    expect(res.headers['x-request-id']).toBe('req-4711');
    const page = (await call('GET', `/admin/v0/audit?user_id=${user.id.toUpperCase()}`)).json() as { entries: Record<string, unknown>[]; next_cursor: string | null };
    expect(page.next_cursor).toBeNull();
    expect(page.entries).toHaveLength(1);
    expect(keysOf(page.entries[0])).toEqual(['action', 'at', 'details', 'id', 'ip', 'key_id', 'key_name', 'request_id', 'user_id']);
    expect(page.entries[0]).toMatchObject({ action: 'user.ban', at: ctx.clock.now().toISOString(), key_id: keyId, ip: '127.0.0.1', request_id: 'req-4711', user_id: user.id });
  });

  it('a change that rolls back leaves no entry, and an entry that cannot be written undoes its change', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    await ctx.db.exec(`CREATE FUNCTION test_refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
      CREATE TRIGGER test_refuse_audit BEFORE INSERT ON admin_audit_log FOR EACH ROW EXECUTE FUNCTION test_refuse_audit();`);
    try {
      expectError(await call('POST', `/admin/v0/users/${user.id}/ban`), 500, 'internal_error');
      expectError(await call('DELETE', `/admin/v0/users/${user.id}`), 500, 'internal_error');
    } finally {
      await ctx.db.exec('DROP TRIGGER test_refuse_audit ON admin_audit_log; DROP FUNCTION test_refuse_audit();');
    }
    expect((await call('GET', `/admin/v0/users/${user.id}`)).json()).toMatchObject({ banned: false });
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(200);
    expect(await auditOf(user.id)).toEqual([]);
  });

  it('the database refuses to change an entry', async () => {
    const user = await createVerifiedUser(ctx);
    await call('POST', `/admin/v0/users/${user.id}/ban`);
    await expect(ctx.db.query("UPDATE admin_audit_log SET action = 'user.unban' WHERE user_id = $1", [user.id])).rejects.toThrow(/never changed/);
  });

  it('pages newest first with an opaque cursor; limit 1 to 200; a cursor the service did not issue is 400', async () => {
    const user = await createVerifiedUser(ctx);
    for (let i = 0; i < 5; i++) {
      ctx.clock.advance(1);
      await call('POST', `/admin/v0/users/${user.id}/ban`, { body: { reason: `r${i}` } });
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await call('GET', `/admin/v0/audit?user_id=${user.id}&limit=2${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
      expect(res.statusCode, res.body).toBe(200);
      const page = res.json() as { entries: { details: { reason: string } }[]; next_cursor: string | null };
      seen.push(...page.entries.map((e) => e.details.reason));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== null);
    expect(seen).toEqual(['r4', 'r3', 'r2', 'r1', 'r0']);
    expect(pages).toBe(3);
    const full = (await call('GET', `/admin/v0/audit?user_id=${user.id}&limit=5`)).json() as { next_cursor: string | null };
    expect(full.next_cursor).toBeNull();

    const first = (await call('GET', '/admin/v0/audit?limit=1')).json() as { next_cursor: string };
    const [payload, mac] = first.next_cursor.split('.');
    const usersCursor = ((await call('GET', '/admin/v0/users?limit=1')).json() as { next_cursor: string }).next_cursor;
    const forged = `${Buffer.from(JSON.stringify(['audit', '2999-01-01T00:00:00.000000Z', randomUUID()])).toString('base64url')}.${mac}`;
    for (const bad of [`${payload}.${mac!.slice(1)}A`, forged, usersCursor, 'x', `${first.next_cursor}.x`]) {
      expectError(await call('GET', `/admin/v0/audit?cursor=${encodeURIComponent(bad)}`), 400, 'admin.validation_failed');
    }
    for (const limit of ['0', '201', '-1', '1.5', 'ten', '']) {
      expectError(await call('GET', `/admin/v0/audit?limit=${limit}`), 400, 'admin.validation_failed');
    }
    expect((await call('GET', '/admin/v0/audit?limit=200')).statusCode).toBe(200);
    expectError(await call('GET', '/admin/v0/audit?user_id=nope'), 400, 'admin.validation_failed');
    expectError(await call('GET', '/admin/v0/audit?action=user.ban'), 400, 'admin.validation_failed');
  });

  it('entries older than RETENTION_ADMIN_AUDIT_DAYS (365) are deleted by the retention worker', async () => {
    const old = randomUUID();
    const recent = randomUUID();
    const day = 86_400_000;
    for (const [id, ageDays] of [[old, 366], [recent, 364]] as const) {
      await ctx.db.query(
        "INSERT INTO admin_audit_log (id, at, key_id, key_name, action, user_id, details) VALUES ($1, $2, NULL, 'cli', 'user.delete', NULL, '{}')",
        [id, new Date(ctx.clock.now().getTime() - ageDays * day)],
      );
    }
    const report = await ctx.app.retention.runOnce();
    expect(report.adminAuditEntries).toBeGreaterThanOrEqual(1);
    const { rows } = await ctx.db.query<{ id: string }>('SELECT id FROM admin_audit_log WHERE id = ANY($1::uuid[])', [[old, recent]]);
    expect(rows.map((r) => r.id)).toEqual([recent]);
  });
});

describe('GET /users: listing and search (docs/admin-api.md#list-users)', () => {
  it('finds by exact id, by a prefix of the username or email in any case, by a prefix of the stored phone; LIKE characters are literal', async () => {
    const stem = `q${randomUUID().slice(0, 6)}`;
    const a = await createVerifiedUser(ctx, { username: `${stem}_alpha`, email: `${stem}.mail@example.test`, phone: `+4477009${String(Math.floor(Math.random() * 90000) + 10000)}` });
    ctx.clock.advance(1);
    const b = await createVerifiedUser(ctx, { username: `${stem}xbeta`, email: `zz_${stem}@example.test` });
    const find = async (query: string): Promise<string[]> => {
      const res = await call('GET', `/admin/v0/users?query=${encodeURIComponent(query)}`);
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { users: { id: string }[] }).users.map((u) => u.id);
    };
    expect(await find(a.id.toUpperCase())).toEqual([a.id]);
    expect(await find(stem.toUpperCase())).toEqual([b.id, a.id]);
    expect(await find(`${stem}_`)).toEqual([a.id]);
    expect(await find(`${stem}.`)).toEqual([a.id]);
    expect(await find(`ZZ_${stem}`)).toEqual([b.id]);
    expect(await find(`zz%${stem}`)).toEqual([]);
    expect(await find((await ctx.db.query<{ phone: string }>('SELECT phone FROM users WHERE id = $1', [a.id])).rows[0]!.phone.slice(0, 10))).toContain(a.id);
    expect(await find(`${stem}_alpha`)).toEqual([a.id]);
    expect(await find('no-one-has-this')).toEqual([]);
    expectError(await call('GET', '/admin/v0/users?query='), 400, 'admin.validation_failed');
    expectError(await call('GET', `/admin/v0/users?query=${'a'.repeat(321)}`), 400, 'admin.validation_failed');
    expectError(await call('GET', '/admin/v0/users?query=a%00b'), 400, 'admin.validation_failed');
  });

  it('pages walk every user exactly once while users are created and deleted between pages (property)', async () => {
    // Users that exist when a walk begins and are not deleted during it are each seen exactly
    // once; users created or deleted meanwhile may be seen or not, never twice.
    const op = fc.oneof(
      fc.record({ kind: fc.constant('create' as const), count: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ kind: fc.constant('delete' as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant('advance' as const), seconds: fc.integer({ min: 0, max: 5 }) }),
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 12 }),
        fc.integer({ min: 1, max: 5 }),
        fc.boolean(),
        fc.array(fc.array(op, { maxLength: 3 }), { maxLength: 12 }),
        async (initial, smallLimit, withQuery, between) => {
          // Pages of 1 to 5 among the run's own users; pages of 20 to 100 over the whole table.
          const limit = withQuery ? smallLimit : smallLimit * 20;
          const prefix = `pw${++run}${randomUUID().slice(0, 4)}_`;
          // A new key before this one reaches the rate limit, which is not what this property is about.
          let walker = await newKey(['users:read', 'users:write']);
          let uses = 0;
          const walkerKey = async (): Promise<string> => {
            if (++uses % (KEY_LIMIT - 5) === 0) walker = await newKey(['users:read', 'users:write']);
            return walker.key;
          };
          const create = async (): Promise<string> => {
            const res = await call('POST', '/admin/v0/users', { key: await walkerKey(), body: { username: `${prefix}${randomUUID().slice(0, 8)}`, email: `${prefix}${randomUUID().slice(0, 8)}@example.test` } });
            expect(res.statusCode, res.body).toBe(201);
            return (res.json() as { id: string }).id;
          };
          for (let i = 0; i < initial; i++) await create();
          const scope = withQuery ? `AND username LIKE '${prefix}%'` : '';
          const atStart = new Set((await ctx.db.query<{ id: string }>(`SELECT id FROM users WHERE true ${scope}`)).rows.map((r) => r.id));
          const deleted = new Set<string>();
          const seen: string[] = [];
          let cursor: string | null = null;
          let page = 0;
          do {
            const query = `limit=${limit}${withQuery ? `&query=${prefix}` : ''}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
            const res = await call('GET', `/admin/v0/users?${query}`, { key: await walkerKey() });
            expect(res.statusCode, res.body).toBe(200);
            const body = res.json() as { users: { id: string }[]; next_cursor: string | null };
            expect(body.users.length).toBeLessThanOrEqual(limit);
            if (body.next_cursor !== null) expect(body.users).toHaveLength(limit);
            seen.push(...body.users.map((u) => u.id));
            cursor = body.next_cursor;
            for (const o of between[page] ?? []) {
              if (o.kind === 'create') for (let i = 0; i < o.count; i++) await create();
              else if (o.kind === 'advance') ctx.clock.advance(o.seconds);
              else {
                const candidates = [...atStart].filter((id) => !deleted.has(id));
                const victim = candidates[o.pick % Math.max(1, candidates.length)];
                if (victim !== undefined) {
                  const del = await call('DELETE', `/admin/v0/users/${victim}`, { key: await walkerKey() });
                  if (del.statusCode === 204) deleted.add(victim);
                }
              }
            }
            page++;
            expect(page, 'the walk ends').toBeLessThan(500);
          } while (cursor !== null);
          expect(new Set(seen).size, 'no user twice').toBe(seen.length);
          for (const id of atStart) if (!deleted.has(id)) expect(seen, `user ${id} skipped`).toContain(id);
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);
});

describe('the audit entry\'s ip follows TRUST_PROXY', () => {
  it('behind a trusted proxy, the X-Forwarded-For client; without TRUST_PROXY (above), the socket peer', async () => {
    const proxied = await createTestContext({ ADMIN_PORT: '0', TRUST_PROXY: 'true' }, { startOutboxWorker: false });
    try {
      const { key: k } = await createAdminKey(proxied.db, { name: 'proxied', scopes: ['users:write'], expiresAt: null, now: proxied.clock.now() });
      const user = await createVerifiedUser(proxied);
      const res = await proxied.app.admin!.inject({ method: 'POST', url: `/admin/v0/users/${user.id}/ban`, headers: { authorization: `Bearer ${k}`, 'x-forwarded-for': '203.0.113.9' } });
      expect(res.statusCode, res.body).toBe(200);
      expect((await proxied.db.query('SELECT ip FROM admin_audit_log WHERE user_id = $1', [user.id])).rows).toEqual([{ ip: '203.0.113.9' }]);
    } finally {
      await proxied.close();
    }
    const user = await createVerifiedUser(ctx);
    await call('POST', `/admin/v0/users/${user.id}/ban`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect((await ctx.db.query('SELECT ip FROM admin_audit_log WHERE user_id = $1', [user.id])).rows).toEqual([{ ip: '127.0.0.1' }]);
  });
});
