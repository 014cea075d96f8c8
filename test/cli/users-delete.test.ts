import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseCommandIo } from '../../src/cli-support.js';
import { runUsersCommand } from '../../src/modules/accounts/accounts.cli.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, refresh, signIn, signUp, withBearer } from '../helpers/flows.js';
import { mailsTo, mailText } from '../helpers/mail.js';

const work = mkdtempSync(path.join(tmpdir(), 'auth-cli-users-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Runs `latchkey users ...` in-process on the test context's database and clock; captures its output. */
async function run(argv: string[], ctx?: TestContext, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: DatabaseCommandIo = {
    env: { DATA_DIR: path.join(work, 'unused-data'), LOG_LEVEL: 'silent', ...env },
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    ...(ctx === undefined ? {} : { openDatabase: async () => ({ ...ctx.db, close: async () => {} }), clock: ctx.clock }),
  };
  const code = await runUsersCommand(argv, io);
  return { code, stdout, stderr };
}

describe('latchkey users delete', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({}, { startOutboxWorker: false });
  });
  afterAll(async () => ctx?.close());

  it('--user <username> deletes the account as delete-account does: tokens dead, identifiers free, notice delivered, security event on stderr', async () => {
    const alice = await createVerifiedUser(ctx);
    const bob = await createVerifiedUser(ctx);
    const a = await signIn(ctx, { username: alice.username, password: alice.password });
    const b = await signIn(ctx, { username: bob.username, password: bob.password });

    const res = await run(['delete', '--user', alice.username.toUpperCase()], ctx, { LOG_LEVEL: 'info' });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toBe(`Deleted ${alice.username} (${alice.id}); a notice is queued to its email address.\n`);
    const event = JSON.parse(res.stderr.trim().split('\n').at(-1)!) as Record<string, unknown>;
    expect(event).toMatchObject({ securityEvent: true, event: 'account.deleted', userId: alice.id, reason: 'operator' });

    expect((await withBearer(ctx, 'GET', '/auth/v0/me', a.accessToken)).statusCode).toBe(401);
    expect((await refresh(ctx, a.refreshToken)).statusCode).toBe(401);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', b.accessToken)).statusCode).toBe(200);
    const { rows } = await ctx.db.query('SELECT 1 FROM users WHERE id = $1', [alice.id]);
    expect(rows).toHaveLength(0);

    const mails = await mailsTo(ctx, alice.email, 2);
    const text = mailText(mails.at(-1)!);
    expect(text).toContain('Subject: Your account was deleted');
    expect(text).toContain('From: an operator of the service');
    expect(text).not.toContain(alice.password);

    expect((await signUp(ctx, { username: alice.username, email: alice.email })).res.statusCode).toBe(201);
  });

  it('--user <id> takes the user id; a user with an unverified email gets no notice', async () => {
    const { body } = await signUp(ctx);
    const res = await run(['delete', `--user=${body.user.id.toUpperCase()}`], ctx);
    expect(res).toMatchObject({ code: 0, stdout: `Deleted ${body.user.username} (${body.user.id}).\n` });
    // Its verification email was cancelled and deleted with the finished rows, and nothing else is queued to it.
    const { rows } = await ctx.db.query<{ kind: string; status: string }>('SELECT kind, status FROM email_outbox WHERE recipient = $1', [body.user.email]);
    expect(rows).toEqual([]);
  });

  it('an unknown user exits 1 and deletes nothing', async () => {
    const unknownId = randomUUID();
    expect(await run(['delete', '--user', 'nobody_here'], ctx)).toMatchObject({ code: 1, stdout: '', stderr: 'No user with username "nobody_here".\n' });
    expect(await run(['delete', '--user', unknownId], ctx)).toMatchObject({ code: 1, stderr: `No user with id "${unknownId}".\n` });
  });

  it.each([
    ['no --user', ['delete'], /--user: expected a user id or username/],
    ['an empty --user', ['delete', '--user', ' '], /--user: expected a user id or username/],
    ['a positional argument', ['delete', 'alice'], /Unexpected argument 'alice'/],
    ['an unknown subcommand', ['list'], /Unknown subcommand "list"/],
    ['no subcommand', [], /Missing subcommand/],
  ])('usage error (%s): exit 2 with the usage on stderr', async (_what, argv, message) => {
    const res = await run(argv, ctx);
    expect(res.code).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(message);
    expect(res.stderr).toContain('Usage: latchkey users');
  });

  it.each([[['--help']], [['delete', '--help']], [['help']]])('%j prints the usage and exits 0', async (argv) => {
    const res = await run(argv);
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toContain('Usage: latchkey users delete --user <id|username>');
  });
});
