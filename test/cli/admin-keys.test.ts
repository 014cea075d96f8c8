/**
 * The operator commands of the admin API (docs/admin-api.md#api-keys): `latchkey admin-keys
 * create|list|revoke`, with keys that then work (or stop working) against the admin listener;
 * and the audit entries of `latchkey users delete` and `latchkey sessions revoke`, which share
 * the admin API's operations (actor `cli`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseCommandIo } from '../../src/cli-support.js';
import { runUsersCommand } from '../../src/modules/accounts/accounts.cli.js';
import { runAdminKeysCommand } from '../../src/modules/admin/admin-keys.cli.js';
import { runSessionsCommand } from '../../src/modules/sessions/sessions.cli.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, signIn } from '../helpers/flows.js';

const work = mkdtempSync(path.join(tmpdir(), 'auth-cli-admin-'));
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ ADMIN_PORT: '0' }, { startOutboxWorker: false });
});
afterAll(async () => {
  await ctx?.close();
  rmSync(work, { recursive: true, force: true });
});

type Command = (argv: readonly string[], io: DatabaseCommandIo) => Promise<number>;

/** Runs a command in-process on the test context's database and clock; captures its output. */
async function run(command: Command, argv: string[], withDatabase = true): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: DatabaseCommandIo = {
    env: { DATA_DIR: path.join(work, 'unused-data'), LOG_LEVEL: 'silent' },
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    ...(withDatabase ? { openDatabase: async () => ({ ...ctx.db, close: async () => {} }), clock: ctx.clock } : {}),
  };
  const code = await command(argv, io);
  return { code, stdout, stderr };
}

/** GET /admin/v0/users?limit=1 on the admin listener with `key`: its status. */
async function statusWith(key: string): Promise<number> {
  return (await ctx.app.admin!.inject({ method: 'GET', url: '/admin/v0/users?limit=1', headers: { authorization: `Bearer ${key}` } })).statusCode;
}

describe('latchkey admin-keys', () => {
  it('create prints the id on one line and the key alone on the last line, once; the key works with exactly its scopes', async () => {
    const res = await run(runAdminKeysCommand, ['create', '--name', 'support backend', '--scopes', 'users:read,audit:read,users:read', '--expires-in-days', '30']);
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stdout.trimEnd().split('\n');
    const id = /^id: ([0-9a-f-]{36})$/.exec(lines.find((l) => l.startsWith('id: '))!)![1]!;
    const key = lines.at(-1)!;
    expect(key).toMatch(/^lk_admin_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
    expect(key).toContain(id.replaceAll('-', ''));
    expect(res.stdout.split(key)).toHaveLength(2);
    expect(res.stdout).toContain(`with scopes users:read,audit:read, expiring ${new Date(ctx.clock.now().getTime() + 30 * 86_400_000).toISOString()}`);
    expect(await statusWith(key)).toBe(200);
    const write = await ctx.app.admin!.inject({ method: 'POST', url: '/admin/v0/users', headers: { authorization: `Bearer ${key}` }, payload: {} });
    expect(write.json()).toMatchObject({ code: 'admin.insufficient_scope' });
  });

  it('list shows id, name, scopes, created, last used, expiry and revocation, never the key; revoke stops the key at once', async () => {
    const created = await run(runAdminKeysCommand, ['create', '--name', 'billing', '--scopes', 'users:write']);
    const key = created.stdout.trimEnd().split('\n').at(-1)!;
    const id = /id: (\S+)/.exec(created.stdout)![1]!;
    await ctx.app.admin!.inject({ method: 'GET', url: '/admin/v0/nope', headers: { authorization: `Bearer ${key}` } });

    let list = await run(runAdminKeysCommand, ['list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/^id\s+name\s+scopes\s+created\s+last_used\s+expires\s+revoked$/);
    const row = list.stdout.split('\n').find((l) => l.startsWith(id))!;
    const at = ctx.clock.now().toISOString().replace(/\.\d{3}Z$/, 'Z');
    expect(row.split(/ {2,}/)).toEqual([id, 'billing', 'users:write', at, at, 'never', 'no']);
    expect(list.stdout).not.toContain(key.slice(-43));

    const revoked = await run(runAdminKeysCommand, ['revoke', id.toUpperCase()]);
    expect(revoked).toMatchObject({ code: 0, stdout: `Revoked admin API key ${id.toUpperCase()}: its next request answers 401.\n` });
    expect(await statusWith(key)).toBe(401);
    expect((await run(runAdminKeysCommand, ['revoke', id])).stdout).toBe(`Admin API key ${id} was already revoked.\n`);
    list = await run(runAdminKeysCommand, ['list']);
    expect(list.stdout.split('\n').find((l) => l.startsWith(id))).toMatch(/yes, \d{4}-\d{2}-\d{2}T/);
    expect(await run(runAdminKeysCommand, ['revoke', '7d2f8a31-5c4e-4b9a-8e1f-3a6b9c0d2e4f'])).toMatchObject({ code: 1, stderr: 'No admin API key 7d2f8a31-5c4e-4b9a-8e1f-3a6b9c0d2e4f.\n' });
  });

  it('an expired key answers 401; list marks it expired', async () => {
    const created = await run(runAdminKeysCommand, ['create', '--name', 'short-lived', '--scopes', 'users:read', '--expires-in-days', '1']);
    const key = created.stdout.trimEnd().split('\n').at(-1)!;
    expect(await statusWith(key)).toBe(200);
    ctx.clock.advance(86_400);
    expect(await statusWith(key)).toBe(401);
    expect((await run(runAdminKeysCommand, ['list'])).stdout).toContain('(expired)');
  });

  it.each([
    ['no --name', ['create', '--scopes', 'users:read'], /--name: expected 1 to 64 characters/],
    ['a name too long', ['create', '--name', 'x'.repeat(65), '--scopes', 'users:read'], /--name/],
    ['no --scopes', ['create', '--name', 'k'], /--scopes: expected one or more of users:read, users:write, sessions:write, webhooks, audit:read/],
    ['an unknown scope', ['create', '--name', 'k', '--scopes', 'users:read,admin'], /unknown scope "admin"/],
    ['days out of range', ['create', '--name', 'k', '--scopes', 'users:read', '--expires-in-days', '0'], /--expires-in-days: expected an integer from 1 to 3650/],
    ['a revoke without id', ['revoke'], /expected one key id/],
    ['a revoke of a non-UUID', ['revoke', 'abc'], /is not an admin API key id/],
    ['an unknown subcommand', ['rotate'], /Unknown subcommand "rotate"/],
  ])('usage error (%s): exit 2 with the usage on stderr, nothing stored', async (_what, argv, message) => {
    const before = (await ctx.db.query('SELECT count(*)::int AS n FROM admin_api_keys')).rows[0];
    const res = await run(runAdminKeysCommand, argv, false);
    expect(res.code).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(message);
    expect(res.stderr).toContain('Usage: latchkey admin-keys');
    expect((await ctx.db.query('SELECT count(*)::int AS n FROM admin_api_keys')).rows[0]).toEqual(before);
  });

  it.each([[['--help']], [['create', '--help']], [['list', '-h']], [['revoke', '--help']]])('%j prints its usage and exits 0', async (argv) => {
    const res = await run(runAdminKeysCommand, argv, false);
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toMatch(/^Usage: latchkey admin-keys/);
  });
});

describe('the operator commands are audited like the admin API, with the actor cli', () => {
  const entries = async (userId: string) =>
    (await ctx.db.query('SELECT action, key_id, key_name, ip, request_id, details FROM admin_audit_log WHERE user_id = $1 ORDER BY at DESC, id DESC', [userId])).rows;

  it('users delete records user.delete', async () => {
    const user = await createVerifiedUser(ctx);
    expect((await run(runUsersCommand, ['delete', '--user', user.username])).code).toBe(0);
    expect(await entries(user.id)).toEqual([{ action: 'user.delete', key_id: null, key_name: 'cli', ip: null, request_id: null, details: { username: user.username } }]);
  });

  it('sessions revoke records sessions.revoke_all when it revoked any, and nothing otherwise', async () => {
    const user = await createVerifiedUser(ctx);
    await signIn(ctx, { username: user.username, password: user.password });
    await signIn(ctx, { username: user.username, password: user.password });
    expect((await run(runSessionsCommand, ['revoke', '--user', user.id])).stdout).toBe(`Revoked 2 active sessions of ${user.username} (${user.id}).\n`);
    expect((await run(runSessionsCommand, ['revoke', '--user', user.id])).stdout).toBe(`Revoked 0 active sessions of ${user.username} (${user.id}).\n`);
    expect(await entries(user.id)).toEqual([{ action: 'sessions.revoke_all', key_id: null, key_name: 'cli', ip: null, request_id: null, details: { sessions_revoked: 2 } }]);
  });
});
