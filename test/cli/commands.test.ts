import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseCommandIo } from '../../src/cli-support.js';
import type { Db } from '../../src/db/db.js';
import { runMigrateCommand } from '../../src/db/migrate.cli.js';
import { openPostgres } from '../../src/db/pg.js';
import { openPglite } from '../../src/db/pglite.js';
import { DEFAULT_LIST_LIMIT, runOutboxCommand } from '../../src/modules/mail/outbox.cli.js';
import { enqueueEmail } from '../../src/modules/mail/outbox.repo.js';
import { MAX_SEND_ATTEMPTS } from '../../src/modules/mail/outbox.worker.js';
import { runSessionsCommand } from '../../src/modules/sessions/sessions.cli.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { PGLITE_FROM_EMPTY_TIMEOUT_MS, testPoolMode } from '../helpers/database.js';
import { createVerifiedUser, postJson, refresh, signIn, signUp, uniqueName, withBearer } from '../helpers/flows.js';

/** What a command printed and returned. */
interface CommandRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** SMTP reply that fails a message permanently: the worker marks its row dead at once (docs/decisions.md#email-outbox). */
const SMTP_PERMANENT_FAILURE = 550;
/** SMTP reply for a transient failure: the row is retried later. */
const SMTP_TRANSIENT_FAILURE = 451;

const work = mkdtempSync(path.join(tmpdir(), 'auth-cli-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/**
 * Runs a command function in-process as the CLI would, on `db` (the command's close() leaves it
 * open, the test owns it), with `env` as its environment and the test clock; captures its output.
 */
async function run(
  command: (argv: readonly string[], io: DatabaseCommandIo) => Promise<number>,
  argv: string[],
  options: { db?: Db; env?: Record<string, string>; ctx?: TestContext } = {},
): Promise<CommandRun> {
  let stdout = '';
  let stderr = '';
  const db = options.db ?? options.ctx?.db;
  const code = await command(argv, {
    env: { DATA_DIR: path.join(work, 'unused-data'), LOG_LEVEL: 'silent', ...options.env },
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    ...(db === undefined ? {} : { openDatabase: async () => ({ ...db, close: async () => {} }) }),
    ...(options.ctx === undefined ? {} : { clock: options.ctx.clock }),
  });
  return { code, stdout, stderr };
}

/**
 * An empty database with no schema at all, of the kind this project runs on (in-memory PGlite,
 * or a new database on the TEST_DATABASE_URL server); dropped by the returned function.
 */
async function emptyDatabase(): Promise<{ db: Db; drop: () => Promise<void> }> {
  if (process.env.TEST_DB !== 'postgres') {
    const db = await openPglite(undefined);
    return { db, drop: () => db.close() };
  }
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const name = `auth_cli_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = openPostgres({ url: url.toString(), poolMax: 2, poolMode: testPoolMode() });
  return {
    db,
    async drop() {
      await db.close();
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** Parses the table `outbox list` prints into one record per row, keyed by the header's column names. */
function parseTable(stdout: string): Record<string, string>[] {
  const lines = stdout.split('\n');
  const headerIndex = lines.findIndex((l) => l.startsWith('id  '));
  if (headerIndex === -1) return [];
  const header = lines[headerIndex]!;
  const names = header.split(/\s{2,}/);
  const starts = names.map((n) => header.indexOf(n));
  const rows: Record<string, string>[] = [];
  for (const line of lines.slice(headerIndex + 1)) {
    if (!/^[0-9a-f]{8}-/.test(line)) break;
    rows.push(Object.fromEntries(names.map((n, i) => [n, line.slice(starts[i], starts[i + 1]).trim()])));
  }
  return rows;
}

describe('latchkey migrate', () => {
  it('applies every migration to an empty database, then reports the schema current (the text .ci/run checks)', async () => {
    const empty = await emptyDatabase();
    try {
      const first = await run(runMigrateCommand, [], { db: empty.db });
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout).toMatch(/^Applied migrations 1, 2(, \d+)*; schema is at version \d+\.\n$/);
      const second = await run(runMigrateCommand, [], { db: empty.db });
      expect(second.code).toBe(0);
      expect(second.stdout).toMatch(/^Schema is current \(version \d+\)\.\n$/);
    } finally {
      await empty.drop();
    }
  }, PGLITE_FROM_EMPTY_TIMEOUT_MS);

  it('--help prints the usage (exit 0); an argument is a usage error (exit 2); a bad configuration exits 1', async () => {
    const help = await run(runMigrateCommand, ['--help']);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toContain('Usage: latchkey migrate');
    const extra = await run(runMigrateCommand, ['now']);
    expect(extra.code).toBe(2);
    expect(extra.stderr).toContain('Usage: latchkey migrate');
    const bad = await run(runMigrateCommand, [], { env: { DATABASE_URL: 'mysql://nope', PORT: 'x' } });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('DATABASE_URL: expected a postgres:// or postgresql:// URL');
    expect(bad.stderr).toContain('PORT:');
  });

  it('database commands refuse a schema that is behind (exit 1, "run latchkey migrate first")', async () => {
    const empty = await emptyDatabase();
    try {
      for (const [command, argv] of [
        [runOutboxCommand, ['list']],
        [runSessionsCommand, ['revoke', '--user', 'alice']],
      ] as const) {
        const res = await run(command, [...argv], { db: empty.db });
        expect(res.code).toBe(1);
        expect(res.stderr).toMatch(/schema is at version 0.*run "latchkey migrate" first/);
      }
    } finally {
      await empty.drop();
    }
  }, PGLITE_FROM_EMPTY_TIMEOUT_MS);
});

describe('latchkey outbox', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => ctx?.close());

  /** Signs up a user whose verification email the SMTP server refuses with `smtpCode`, and lets the worker try once. */
  async function signUpWithFailingEmail(smtpCode: number): Promise<{ email: string; outboxId: string }> {
    const { res, body } = await signUp(ctx);
    expect(res.statusCode).toBe(201);
    const email = body.user.email!;
    const previous = ctx.smtp.reply;
    ctx.smtp.reply = (m) => (m.to.includes(email) ? smtpCode : previous(m));
    await ctx.app.outbox.runOnce();
    const { rows } = await ctx.db.query<{ id: string }>('SELECT id FROM email_outbox WHERE recipient = $1', [email]);
    return { email, outboxId: rows[0]!.id };
  }

  async function rowOf(id: string) {
    const { rows } = await ctx.db.query<{ status: string; attempts: number; last_error: string | null; next_attempt_at: Date; has_code: boolean }>(
      "SELECT status, attempts, last_error, next_attempt_at, (payload ? 'code') AS has_code FROM email_outbox WHERE id = $1",
      [id],
    );
    return rows[0]!;
  }

  it('list shows id, kind, status, recipient, attempts, last_error, next_attempt_at, created_at, newest first, and never the code', async () => {
    // One second apart: the test clock stands still otherwise, and the order is by created_at.
    const delivered = await createVerifiedUser(ctx);
    ctx.clock.advance(1);
    const dead = await signUpWithFailingEmail(SMTP_PERMANENT_FAILURE);
    ctx.clock.advance(1);
    const retrying = await signUpWithFailingEmail(SMTP_TRANSIENT_FAILURE);

    const res = await run(runOutboxCommand, ['list'], { ctx });
    expect(res.code, res.stderr).toBe(0);
    const header = res.stdout.split('\n')[0]!;
    expect(header.split(/\s+/)).toEqual(['id', 'kind', 'status', 'recipient', 'attempts', 'last_error', 'next_attempt_at', 'created_at']);
    const rows = parseTable(res.stdout);
    expect(rows.map((r) => r.recipient)).toEqual([retrying.email, dead.email, delivered.email]);
    expect(rows[0]).toMatchObject({ id: retrying.outboxId, status: 'pending', attempts: '1' });
    expect(rows[0]!.last_error).toMatch(/451/);
    expect(rows[1]).toMatchObject({ id: dead.outboxId, status: 'dead', attempts: '1' });
    expect(rows[1]!.last_error).toMatch(/550/);
    expect(rows[2]).toMatchObject({ kind: 'verification', status: 'sent', attempts: '1', last_error: '-' });
    for (const r of rows) {
      expect(r.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(r.next_attempt_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    }
    expect(res.stdout).toMatch(/^Totals: pending 1, sent 1, suppressed 0, dead 1, cancelled 0$/m);

    // The pending row still holds its code in the payload; the listing must not show it.
    const { rows: payloads } = await ctx.db.query<{ code: string }>("SELECT payload->>'code' AS code FROM email_outbox WHERE id = $1", [retrying.outboxId]);
    expect(payloads[0]!.code).toMatch(/^\d{6}$/);
    expect(res.stdout).not.toContain(payloads[0]!.code);
    expect(res.stdout).not.toContain('payload');
  });

  it('a password-reset request for an address no account has is listed as suppressed (nothing was sent, and why), never as sent; the metric counts it', async () => {
    const nobody = `${uniqueName('nobody')}@example.test`;
    const known = await createVerifiedUser(ctx);
    for (const email of [nobody, known.email]) expect((await postJson(ctx, '/auth/v0/password-reset', { email })).statusCode).toBe(204);
    // One round does the requests' work, the next sends the reset email it queued for the known address.
    await ctx.app.outbox.runOnce();
    await ctx.app.outbox.runOnce();
    expect(ctx.smtp.messages.filter((m) => m.to.includes(nobody))).toEqual([]);

    const res = await run(runOutboxCommand, ['list'], { ctx });
    expect(res.code, res.stderr).toBe(0);
    const rows = parseTable(res.stdout);
    const forNobody = rows.filter((r) => r.recipient === nobody);
    expect(forNobody).toHaveLength(1);
    expect(forNobody[0]).toMatchObject({ kind: 'password_reset_request', status: 'suppressed', last_error: 'no account has this address: nothing was sent' });
    // The known address: the request is done and its email sent, each row saying which it is.
    expect(rows.filter((r) => r.recipient === known.email && r.kind!.startsWith('password_reset')).map((r) => [r.kind, r.status]).sort()).toEqual([
      ['password_reset', 'sent'],
      ['password_reset_request', 'sent'],
    ]);
    expect(res.stdout).toMatch(/^Totals: pending \d+, sent \d+, suppressed [1-9]\d*, dead \d+, cancelled \d+$/m);

    const only = await run(runOutboxCommand, ['list', '--status', 'suppressed'], { ctx });
    expect(only.code, only.stderr).toBe(0);
    expect(parseTable(only.stdout).map((r) => r.recipient)).toContain(nobody);
    expect(new Set(parseTable(only.stdout).map((r) => r.status))).toEqual(new Set(['suppressed']));
    const metrics = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/^auth_emails_suppressed_total\{reason="no_account"\} [1-9]\d*$/m);
  });

  it('list --status dead shows only dead rows; --limit cuts and says so', async () => {
    await signUpWithFailingEmail(SMTP_PERMANENT_FAILURE);
    const dead = await run(runOutboxCommand, ['list', '--status', 'dead'], { ctx });
    expect(dead.code).toBe(0);
    const rows = parseTable(dead.stdout);
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(new Set(rows.map((r) => r.status))).toEqual(new Set(['dead']));

    const limited = await run(runOutboxCommand, ['list', '--limit=1'], { ctx });
    expect(parseTable(limited.stdout)).toHaveLength(1);
    expect(limited.stdout).toMatch(/^\(1 of \d+ shown; --limit for more\)$/m);

    const none = await run(runOutboxCommand, ['list', '--status', 'cancelled'], { ctx });
    expect(none).toMatchObject({ code: 0, stderr: '' });
    expect(none.stdout).toMatch(/^No cancelled rows\.$/m);
  });

  it.each([
    ['an unknown status', ['list', '--status', 'failed'], /--status: expected one of pending, sent, suppressed, dead, cancelled, got "failed"/],
    ['a zero limit', ['list', '--limit', '0'], /--limit: expected an integer from 1 to 1000/],
    ['a limit that is no number', ['list', '--limit', 'all'], /--limit: expected an integer/],
    ['an unknown option', ['list', '--payload'], /Unknown option '--payload'/],
    ['retry without a target', ['retry'], /expected either one row id or --all-dead/],
    ['retry with both targets', ['retry', randomUUID(), '--all-dead'], /expected either one row id or --all-dead/],
    ['retry with a bad id', ['retry', 'abc'], /"abc" is not an outbox row id/],
    ['an unknown subcommand', ['purge'], /Unknown subcommand "purge"/],
    ['no subcommand', [], /Missing subcommand/],
  ])('usage error (%s): exit 2, message and usage on stderr, nothing on stdout', async (_what, argv, message) => {
    const res = await run(runOutboxCommand, argv, { ctx });
    expect(res.code).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(message);
    expect(res.stderr).toContain('Usage: latchkey outbox');
  });

  it.each([
    [['--help'], 'Usage: latchkey outbox <list|retry>'],
    [['list', '--help'], 'Usage: latchkey outbox list'],
    [['retry', '-h'], 'Usage: latchkey outbox retry'],
    // What the command does: a dead row keeps its code until it expires, so a retry sends it.
    [['retry', '--help'], 'A dead row keeps its verification code until the code expires'],
  ])('%j prints its usage and exits 0', async (argv, usage) => {
    const res = await run(runOutboxCommand, argv);
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toContain(usage);
  });

  it('retry <id>: a dead row goes back to pending with attempts 0, next attempt now and last_error kept; the worker then sends it (a dead row keeps its code until the code expires)', async () => {
    const dead = await signUpWithFailingEmail(SMTP_PERMANENT_FAILURE);
    const before = await rowOf(dead.outboxId);
    expect(before).toMatchObject({ status: 'dead', attempts: 1, has_code: true });
    ctx.clock.advance(30);

    const res = await run(runOutboxCommand, ['retry', dead.outboxId], { ctx });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(`retried  ${dead.outboxId}  ${dead.email}`);
    expect(res.stdout).not.toContain('nothing left to send');
    expect(res.stdout).toMatch(/Put 1 dead row back to pending/);
    const after = await rowOf(dead.outboxId);
    expect(after).toMatchObject({ status: 'pending', attempts: 0, last_error: before.last_error });
    expect(after.next_attempt_at.getTime()).toBe(ctx.clock.now().getTime());

    ctx.smtp.reply = () => undefined;
    await ctx.app.outbox.runOnce();
    expect(await rowOf(dead.outboxId)).toMatchObject({ status: 'sent', has_code: false });
    expect(ctx.smtp.messages.some((m) => m.to.includes(dead.email))).toBe(true);

    // Retrying a row that is not dead (now sent) changes nothing: exit 1.
    const again = await run(runOutboxCommand, ['retry', dead.outboxId], { ctx });
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`Outbox row ${dead.outboxId} is sent, not dead; nothing to retry.\n`);
    const missing = randomUUID();
    expect(await run(runOutboxCommand, ['retry', missing], { ctx })).toMatchObject({ code: 1, stderr: `No outbox row ${missing}.\n` });
  });

  it('retry --all-dead: every dead row goes back to pending; a row that still has its unexpired content is then sent', async () => {
    // Written directly: a dead row with a live code, as the worker leaves one after a 5xx.
    const id = randomUUID();
    const email = `deliverable_${randomBytes(4).toString('hex')}@example.test`;
    await enqueueEmail(ctx.db, {
      id,
      kind: 'verification',
      recipient: email,
      payload: { username: 'deliverable', code: '123456' },
      now: ctx.clock.now(),
      expiresAt: new Date(ctx.clock.now().getTime() + 600_000),
    });
    await ctx.db.query("UPDATE email_outbox SET status = 'dead', attempts = $2, last_error = 'connection refused' WHERE id = $1", [id, MAX_SEND_ATTEMPTS]);
    const { rows: deadBefore } = await ctx.db.query<{ n: number; without_code: number }>(
      "SELECT count(*)::int AS n, (count(*) FILTER (WHERE NOT payload ? 'code'))::int AS without_code FROM email_outbox WHERE status = 'dead'",
    );

    const res = await run(runOutboxCommand, ['retry', '--all-dead'], { ctx });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(`retried  ${id}  ${email}\n`);
    expect(res.stdout).toMatch(new RegExp(`Put ${deadBefore[0]!.n} dead rows back to pending`));
    const withoutCode = deadBefore[0]!.without_code;
    if (withoutCode === 0) expect(res.stdout).not.toContain('Note:');
    else expect(res.stdout).toMatch(new RegExp(`Note: ${withoutCode} of them ha(s|ve) no verification code left`));
    const { rows: deadAfter } = await ctx.db.query<{ n: number }>("SELECT count(*)::int AS n FROM email_outbox WHERE status = 'dead'");
    expect(deadAfter[0]!.n).toBe(0);
    expect(await rowOf(id)).toMatchObject({ status: 'pending', attempts: 0, last_error: 'connection refused' });

    await ctx.app.outbox.runOnce();
    expect(await rowOf(id)).toMatchObject({ status: 'sent', attempts: 1, has_code: false });
    expect(ctx.smtp.messages.some((m) => m.to.includes(email) && m.raw.includes('123456'))).toBe(true);

    const nothing = await run(runOutboxCommand, ['retry', '--all-dead'], { ctx });
    expect(nothing).toMatchObject({ code: 0, stdout: 'No dead rows; nothing to retry.\n' });
  });

  it(`list on an empty outbox says so; the default limit is ${DEFAULT_LIST_LIMIT}`, async () => {
    const empty = await emptyDatabase();
    try {
      await run(runMigrateCommand, [], { db: empty.db });
      const res = await run(runOutboxCommand, ['list'], { db: empty.db });
      expect(res).toMatchObject({ code: 0, stdout: 'The outbox is empty.\nTotals: pending 0, sent 0, suppressed 0, dead 0, cancelled 0\n' });
    } finally {
      await empty.drop();
    }
  }, PGLITE_FROM_EMPTY_TIMEOUT_MS);
});

describe('latchkey sessions revoke', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => ctx?.close());

  it('--user <username> revokes every active session of that user, prints how many, and leaves other users alone', async () => {
    const alice = await createVerifiedUser(ctx);
    const bob = await createVerifiedUser(ctx);
    const a1 = await signIn(ctx, { username: alice.username, password: alice.password });
    const a2 = await signIn(ctx, { username: alice.username, password: alice.password });
    const b1 = await signIn(ctx, { username: bob.username, password: bob.password });
    // An expired session is not active: it is not counted (nor touched).
    await ctx.db.query('UPDATE sessions SET expires_at = $2 WHERE id = $1', [a1.sessionId, new Date(ctx.clock.now().getTime() - 1000)]);

    const res = await run(runSessionsCommand, ['revoke', '--user', alice.username.toUpperCase()], { ctx, env: { LOG_LEVEL: 'info' } });
    const stderr = res.stderr;
    expect(res.code, stderr).toBe(0);
    expect(res.stdout).toBe(`Revoked 1 active session of ${alice.username} (${alice.id}).\n`);
    // The security event of the admin action, as one JSON line on stderr.
    const event = JSON.parse(stderr.trim().split('\n').at(-1)!) as Record<string, unknown>;
    expect(event).toMatchObject({ securityEvent: true, event: 'session.revoked', userId: alice.id, reason: 'revoked_by_admin', count: 1 });

    expect((await withBearer(ctx, 'GET', '/auth/v0/me', a2.accessToken)).statusCode).toBe(401);
    expect((await refresh(ctx, a2.refreshToken)).statusCode).toBe(401);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', b1.accessToken)).statusCode).toBe(200);
    const { rows } = await ctx.db.query<{ id: string; revoked_reason: string | null }>('SELECT id, revoked_reason FROM sessions WHERE user_id = $1 ORDER BY created_at, id', [alice.id]);
    expect(Object.fromEntries(rows.map((r) => [r.id, r.revoked_reason]))).toEqual({ [a1.sessionId]: null, [a2.sessionId]: 'revoked_by_admin' });

    // Again: nothing left to revoke, still success.
    const again = await run(runSessionsCommand, ['revoke', '--user', alice.username], { ctx });
    expect(again).toMatchObject({ code: 0, stdout: `Revoked 0 active sessions of ${alice.username} (${alice.id}).\n` });
  });

  it('--user <id> takes the user id', async () => {
    const carol = await createVerifiedUser(ctx);
    await signIn(ctx, { username: carol.username, password: carol.password });
    await signIn(ctx, { username: carol.username, password: carol.password });
    const res = await run(runSessionsCommand, ['revoke', `--user=${carol.id.toUpperCase()}`], { ctx });
    expect(res).toMatchObject({ code: 0, stdout: `Revoked 2 active sessions of ${carol.username} (${carol.id}).\n` });
  });

  it('an unknown user exits 1 and revokes nothing', async () => {
    const unknownId = randomUUID();
    expect(await run(runSessionsCommand, ['revoke', '--user', 'nobody_here'], { ctx })).toMatchObject({ code: 1, stdout: '', stderr: 'No user with username "nobody_here".\n' });
    expect(await run(runSessionsCommand, ['revoke', '--user', unknownId], { ctx })).toMatchObject({ code: 1, stderr: `No user with id "${unknownId}".\n` });
  });

  it.each([
    ['no --user', ['revoke'], /--user: expected a user id or username/],
    ['an empty --user', ['revoke', '--user', ' '], /--user: expected a user id or username/],
    ['--user without a value', ['revoke', '--user'], /Option '--user <value>' argument missing/],
    ['a positional argument', ['revoke', 'alice'], /Unexpected argument 'alice'/],
    ['an unknown subcommand', ['list'], /Unknown subcommand "list"/],
    ['no subcommand', [], /Missing subcommand/],
  ])('usage error (%s): exit 2 with the usage on stderr', async (_what, argv, message) => {
    const res = await run(runSessionsCommand, argv, { ctx });
    expect(res.code).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(message);
    expect(res.stderr).toContain('Usage: latchkey sessions revoke --user <id|username>');
  });

  it.each([[['--help']], [['revoke', '--help']], [['help']]])('%j prints the usage and exits 0', async (argv) => {
    const res = await run(runSessionsCommand, argv);
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toContain('Usage: latchkey sessions revoke --user <id|username>');
  });
});
