import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSmtpTransport } from '../../src/modules/mail/mail.transport.js';
import { BACKOFF_BASE_MS, BACKOFF_CAP_MS, createOutboxWorker, MAX_SEND_ATTEMPTS, retryDelayMs } from '../../src/modules/mail/outbox.worker.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { PASSWORD, postJson, signUp, uniqueName } from '../helpers/flows.js';
import { codeFrom, type ReceivedMail } from '../helpers/smtp.js';

/**
 * Code lifetime for this file: longer than the sum of the first nine retry delays
 * (2+4+...+512 s = 1022 s at most), so that ten failed attempts can happen before the code
 * expires and the row is cancelled instead.
 */
const CODE_TTL_SECONDS = 7200;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ VERIFICATION_CODE_TTL_SECONDS: String(CODE_TTL_SECONDS) });
  // Rounds run only when a test calls runOnce(): no background round races a scripted SMTP reply.
  await ctx.app.outbox.stop();
});
afterAll(async () => ctx.close());

interface OutboxRow {
  id: string;
  kind: string;
  recipient: string;
  payload: { username: string; code?: string };
  status: string;
  attempts: number;
  last_error: string | null;
  created_at: Date;
  next_attempt_at: Date;
  lease_owner: string | null;
  sent_at: Date | null;
  expires_at: Date | null;
}

async function outboxRows(c: TestContext, recipient: string): Promise<OutboxRow[]> {
  const { rows } = await c.db.query<OutboxRow>('SELECT * FROM email_outbox WHERE recipient = $1 ORDER BY created_at, id', [recipient]);
  return rows;
}

/** The only outbox row for `recipient`. */
async function onlyRow(c: TestContext, recipient: string): Promise<OutboxRow> {
  const rows = await outboxRows(c, recipient);
  expect(rows).toHaveLength(1);
  return rows[0]!;
}

/** Signs up a user with a fresh email; returns the (normalised) email. */
async function newSignUp(c: TestContext = ctx): Promise<string> {
  const { res, body } = await signUp(c);
  expect(res.statusCode, res.body).toBe(201);
  return body.user.email!;
}

function mailsTo(email: string): ReceivedMail[] {
  return ctx.smtp.messages.filter((m) => m.to.includes(email));
}

/** One header of a raw message (unfolded), or undefined. */
function header(mail: ReceivedMail, name: string): string | undefined {
  const head = mail.raw.split(/\r?\n\r?\n/)[0]!.replace(/\r?\n[ \t]+/g, ' ');
  const line = head.split(/\r?\n/).find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

/** Milliseconds from the test clock's now to `t`. */
function msFromNow(t: Date): number {
  return t.getTime() - ctx.clock.now().getTime();
}

/** The first retry's delay bounds for attempt `n` (equal jitter: [d/2, d]). */
function delayBounds(attempt: number): [number, number] {
  const d = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1));
  return [d / 2, d];
}

describe('email outbox with a real SMTP server', () => {
  it('sign-up writes one outbox row; the worker delivers it once, then records sent and drops the code', async () => {
    const email = await newSignUp();
    const queued = await onlyRow(ctx, email);
    expect(queued).toMatchObject({ kind: 'verification', status: 'pending', attempts: 0, last_error: null, sent_at: null });
    const code = queued.payload.code!;
    expect(code).toMatch(/^[0-9]{6}$/);
    expect(mailsTo(email)).toHaveLength(0);

    await ctx.app.outbox.runOnce();
    const mails = mailsTo(email);
    expect(mails).toHaveLength(1);
    const mail = mails[0]!;
    expect(mail.to).toEqual([email]);
    expect(header(mail, 'To')).toBe(email);
    expect(header(mail, 'From')).toMatch(/^"?Auth Test"? <auth@example\.test>$/);
    expect(header(mail, 'Message-ID')).toBe(`<${queued.id}@latchkey>`);
    expect(codeFrom(mail)).toBe(code);

    const sent = await onlyRow(ctx, email);
    expect(sent.status).toBe('sent');
    expect(sent.sent_at).not.toBeNull();
    expect(sent.payload).toEqual({ username: queued.payload.username });
    expect(sent.lease_owner).toBeNull();

    // Nothing is sent twice.
    await ctx.app.outbox.runOnce();
    expect(mailsTo(email)).toHaveLength(1);

    // One delivery attempt was made, and the row counts it (docs/api.md#sign-up, docs/decisions.md#email-outbox).
    expect(sent.attempts).toBe(1);
  });

  it('the outbox row commits in the same transaction as the user: a failing outbox insert rolls the sign-up back', async () => {
    const username = uniqueName();
    const email = `${username}@example.test`;
    await ctx.db.query(`ALTER TABLE email_outbox ADD CONSTRAINT test_refuse_recipient CHECK (recipient <> '${email}') NOT VALID`);
    try {
      const res = await postJson(ctx, '/auth/v0/sign-up', { username, email, password: PASSWORD });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ code: 'internal_error', message: expect.any(String) });
    } finally {
      await ctx.db.query('ALTER TABLE email_outbox DROP CONSTRAINT test_refuse_recipient');
    }
    const users = await ctx.db.query('SELECT 1 FROM users WHERE username = $1', [username]);
    expect(users.rows).toHaveLength(0);
    const codes = await ctx.db.query('SELECT 1 FROM verification_codes WHERE email = $1', [email]);
    expect(codes.rows).toHaveLength(0);
    // The same sign-up then succeeds and queues exactly one row.
    const again = await postJson(ctx, '/auth/v0/sign-up', { username, email, password: PASSWORD });
    expect(again.statusCode).toBe(201);
    expect(await outboxRows(ctx, email)).toHaveLength(1);
    await ctx.app.outbox.runOnce();
    expect(mailsTo(email)).toHaveLength(1);
  });

  it('SMTP 451: the row stays pending with attempts 1, last_error and a retry 1-2 s later; it is delivered after the delay', async () => {
    const email = await newSignUp();
    ctx.smtp.reply = (m) => (m.to.includes(email) ? 451 : undefined);
    try {
      await ctx.app.outbox.runOnce();
      expect(mailsTo(email)).toHaveLength(0);
      const failed = await onlyRow(ctx, email);
      expect(failed).toMatchObject({ status: 'pending', attempts: 1, lease_owner: null });
      expect(failed.last_error).toContain('451');
      expect(failed.payload.code).toMatch(/^[0-9]{6}$/);
      const delay = msFromNow(failed.next_attempt_at);
      expect(delay).toBeGreaterThanOrEqual(1000);
      expect(delay).toBeLessThanOrEqual(2000);
    } finally {
      ctx.smtp.reply = () => undefined;
    }
    // Not due yet: nothing happens before the delay.
    await ctx.app.outbox.runOnce();
    expect(mailsTo(email)).toHaveLength(0);
    expect((await onlyRow(ctx, email)).status).toBe('pending');

    ctx.clock.advance(2);
    await ctx.app.outbox.runOnce();
    expect(mailsTo(email)).toHaveLength(1);
    const sent = await onlyRow(ctx, email);
    expect(sent.status).toBe('sent');
    expect(sent.payload.code).toBeUndefined();
  });

  it('SMTP 550: the row is dead at once with last_error, keeping its code only until it expires; another email in the same round is delivered', async () => {
    const doomed = await newSignUp();
    const fine = await newSignUp();
    ctx.smtp.reply = (m) => (m.to.includes(doomed) ? 550 : undefined);
    try {
      expect(await ctx.app.outbox.runOnce()).toBe(2);
    } finally {
      ctx.smtp.reply = () => undefined;
    }
    const dead = await onlyRow(ctx, doomed);
    expect(dead).toMatchObject({ status: 'dead', attempts: 1, sent_at: null, lease_owner: null });
    expect(dead.last_error).toContain('550');
    // The code stays until it expires, so `outbox retry` can still send it.
    expect(dead.payload).toEqual({ username: expect.any(String), code: expect.stringMatching(/^\d{6}$/) });
    expect(mailsTo(doomed)).toHaveLength(0);

    expect((await onlyRow(ctx, fine)).status).toBe('sent');
    expect(mailsTo(fine)).toHaveLength(1);

    // Dead is final: no further attempt even much later, and once the code expired it is gone.
    ctx.clock.advance(Number(ctx.config.verificationCodeTtlSeconds) + 1);
    await ctx.app.outbox.runOnce();
    expect(mailsTo(doomed)).toHaveLength(0);
    const later = await onlyRow(ctx, doomed);
    expect(later.attempts).toBe(1);
    expect(later.payload).toEqual({ username: expect.any(String) });
  });

  it(`${MAX_SEND_ATTEMPTS} failed 4xx attempts make the row dead, each retry after an exponential, capped delay`, async () => {
    const email = await newSignUp();
    ctx.smtp.reply = (m) => (m.to.includes(email) ? 451 : undefined);
    try {
      for (let attempt = 1; attempt <= MAX_SEND_ATTEMPTS; attempt++) {
        await ctx.app.outbox.runOnce();
        const row = await onlyRow(ctx, email);
        expect(row.attempts).toBe(attempt);
        expect(row.last_error).toContain('451');
        if (attempt === MAX_SEND_ATTEMPTS) {
          expect(row.status).toBe('dead');
          break;
        }
        expect(row.status).toBe('pending');
        const delay = msFromNow(row.next_attempt_at);
        const [min, max] = delayBounds(attempt);
        expect(delay).toBeGreaterThanOrEqual(min);
        expect(delay).toBeLessThanOrEqual(max);
        // One second short of the retry, nothing happens.
        ctx.clock.advance(Math.ceil(delay / 1000) - 1);
        await ctx.app.outbox.runOnce();
        expect((await onlyRow(ctx, email)).attempts).toBe(attempt);
        ctx.clock.advance(1);
      }
    } finally {
      ctx.smtp.reply = () => undefined;
    }
    ctx.clock.advance(BACKOFF_CAP_MS / 1000);
    await ctx.app.outbox.runOnce();
    expect(mailsTo(email)).toHaveLength(0);
    expect((await onlyRow(ctx, email)).attempts).toBe(MAX_SEND_ATTEMPTS);
  });

  it('a row whose code expired before delivery is not sent: cancelled, code removed', async () => {
    const email = await newSignUp();
    const queued = await onlyRow(ctx, email);
    expect(msFromNow(queued.expires_at!)).toBe(CODE_TTL_SECONDS * 1000);
    ctx.clock.advance(CODE_TTL_SECONDS);
    await ctx.app.outbox.runOnce();
    expect(mailsTo(email)).toHaveLength(0);
    const row = await onlyRow(ctx, email);
    expect(row.status).toBe('cancelled');
    expect(row.sent_at).toBeNull();
    expect(row.payload).toEqual({ username: queued.payload.username });
  });

  it('a password-reset request whose work fails stays pending with last_error and nothing of it committed; the retry issues the code and its email once', async () => {
    const email = await newSignUp();
    expect((await postJson(ctx, '/auth/v0/password-reset', { email })).statusCode).toBe(204);
    let failures = 1;
    const worker = createOutboxWorker({
      db: ctx.db,
      transport: createSmtpTransport(ctx.config.smtp!),
      clock: ctx.clock,
      log: ctx.app.log,
      passwordResetRequest: async (tx, address) => {
        const issued = await ctx.app.passwordReset.handleRequest(tx, address);
        if (failures-- > 0) throw new Error('simulated database error');
        return issued;
      },
    });
    const resetRows = async () =>
      (await outboxRows(ctx, email)).filter((r) => r.kind.startsWith('password_reset')).map((r) => ({ kind: r.kind, status: r.status, attempts: r.attempts }));
    const resetCodes = async () => (await ctx.db.query("SELECT 1 FROM verification_codes WHERE email = $1 AND purpose = 'password_reset'", [email])).rows.length;
    try {
      await worker.runOnce();
      expect(await resetRows()).toEqual([{ kind: 'password_reset_request', status: 'pending', attempts: 1 }]);
      expect((await outboxRows(ctx, email)).find((r) => r.kind === 'password_reset_request')!.last_error).toBe('simulated database error');
      expect(await resetCodes()).toBe(0);
      ctx.clock.advance(2);
      await worker.runOnce();
      await worker.runOnce();
    } finally {
      await worker.stop();
    }
    expect(await resetRows()).toEqual([
      { kind: 'password_reset_request', status: 'sent', attempts: 2 },
      { kind: 'password_reset', status: 'sent', attempts: 1 },
    ]);
    expect(await resetCodes()).toBe(1);
    expect(mailsTo(email).filter((m) => /Reset your password/.test(m.raw))).toHaveLength(1);
  });

  it('two workers on one database deliver each of 20 emails exactly once', async () => {
    const emails = await Promise.all(Array.from({ length: 20 }, () => newSignUp()));
    const second = createOutboxWorker({ db: ctx.db, transport: createSmtpTransport(ctx.config.smtp!), clock: ctx.clock, log: ctx.app.log });
    let byFirst = 0;
    let bySecond = 0;
    try {
      for (let round = 0; round < 4; round++) {
        const [a, b] = await Promise.all([ctx.app.outbox.runOnce(), second.runOnce()]);
        byFirst += a;
        bySecond += b;
      }
    } finally {
      await second.stop();
    }
    // Both took part, and no row was claimed twice.
    expect(byFirst).toBeGreaterThan(0);
    expect(bySecond).toBeGreaterThan(0);
    expect(byFirst + bySecond).toBe(20);
    for (const email of emails) {
      expect(mailsTo(email), email).toHaveLength(1);
      expect((await onlyRow(ctx, email)).status).toBe('sent');
    }
  });
});

describe('SMTP server down', () => {
  /** A TCP server that accepts connections and never answers (an SMTP server that hangs). */
  let silent: Server;
  const held: Socket[] = [];
  let down: TestContext;

  beforeAll(async () => {
    silent = createServer((socket) => {
      held.push(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    down = await createTestContext({ SMTP_PORT: String((silent.address() as AddressInfo).port) });
  });
  afterAll(async () => {
    for (const s of held) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
    await down.close();
  });

  it('sign-up answers 201 at once while SMTP hangs or refuses; the row stays pending with last_error', async () => {
    // The running worker picks the first email up and hangs in the SMTP greeting...
    const first = await newSignUp(down);
    for (let i = 0; i < 200 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(held.length).toBeGreaterThan(0);
    // ...and a sign-up meanwhile is not held up by it.
    const started = Date.now();
    const second = await newSignUp(down);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(held.length).toBeGreaterThan(0);
    expect((await onlyRow(down, first)).attempts).toBe(0);

    // The server goes away: the connection fails, the attempt is recorded, the row waits for a retry.
    for (const s of held) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
    await down.app.outbox.runOnce();
    const failed = await onlyRow(down, first);
    expect(failed).toMatchObject({ status: 'pending', attempts: 1, lease_owner: null });
    expect(failed.last_error).toMatch(/closed/i);
    expect(failed.payload.code).toMatch(/^[0-9]{6}$/);
    const refused = await onlyRow(down, second);
    expect(refused).toMatchObject({ status: 'pending', attempts: 1 });
    expect(refused.last_error).toMatch(/ECONNREFUSED/);

    // Nothing listens any more: the next attempts are refused, and recorded as such.
    down.clock.advance(BACKOFF_CAP_MS / 1000);
    await down.app.outbox.runOnce();
    for (const email of [first, second]) {
      const row = await onlyRow(down, email);
      expect(row).toMatchObject({ status: 'pending', attempts: 2 });
      expect(row.last_error).toMatch(/ECONNREFUSED/);
      expect(row.next_attempt_at.getTime()).toBeGreaterThan(down.clock.now().getTime());
    }
    expect(down.smtp.messages).toHaveLength(0);
  });
});

describe('retryDelayMs', () => {
  it('is d/2 with random 0 and d with random 1, where d = min(10 min, 2 s * 2^(attempt-1)), for attempts 1..12', () => {
    const expected = [2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 512_000, 600_000, 600_000, 600_000];
    for (let attempt = 1; attempt <= 12; attempt++) {
      const d = expected[attempt - 1]!;
      expect(retryDelayMs(attempt, () => 0), `attempt ${attempt}`).toBe(d / 2);
      expect(retryDelayMs(attempt, () => 1), `attempt ${attempt}`).toBe(d);
    }
    expect(BACKOFF_CAP_MS).toBe(600_000);
  });

  it('stays within [d/2, d], is an integer and grows with the draw (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true }), (attempt, r1, r2) => {
        const [min, max] = delayBounds(attempt);
        const a = retryDelayMs(attempt, () => r1);
        expect(Number.isInteger(a)).toBe(true);
        expect(a).toBeGreaterThanOrEqual(min);
        expect(a).toBeLessThanOrEqual(max);
        const [lo, hi] = r1 <= r2 ? [r1, r2] : [r2, r1];
        expect(retryDelayMs(attempt, () => lo)).toBeLessThanOrEqual(retryDelayMs(attempt, () => hi));
      }),
    );
  });

  it('never shrinks from one attempt to the next for the same draw (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.double({ min: 0, max: 1, noNaN: true }), (attempt, r) => {
        expect(retryDelayMs(attempt + 1, () => r)).toBeGreaterThanOrEqual(retryDelayMs(attempt, () => r));
        expect(retryDelayMs(attempt, () => r)).toBeLessThanOrEqual(BACKOFF_CAP_MS);
      }),
    );
  });
});
