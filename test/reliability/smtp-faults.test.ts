import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createSmtpTransport, isPermanentSmtpFailure, type SmtpTimeouts } from '../../src/modules/mail/mail.transport.js';
import { createOutboxWorker, type OutboxWorker } from '../../src/modules/mail/outbox.worker.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signUp } from '../helpers/flows.js';
import type { TestSmtpServer } from '../helpers/smtp.js';
import { messageIdOf, startFaultSmtpServer, type FaultSmtpServer } from './helpers/fault-smtp.js';
import { createSelfSignedCertificate, type SelfSignedCertificate } from './helpers/tls-certificate.js';

/**
 * SMTP faults that test/contract/outbox.test.ts does not already cause (it covers 4xx with
 * backoff, 5xx dead at once, the 10th failure, a server down at sign-up, expiry before the first
 * attempt, two workers): the three TLS modes against a server with a self-signed certificate
 * and `SMTP_CA_FILE`, a server that accepts and never answers (greeting and DATA timeouts), and
 * a code that expires while its email is being retried.
 */

/**
 * Timeouts short enough that a hung server fails an attempt in well under a second, not 10 to
 * 20 s. The greeting timeout is the shorter, so that a silent server is reported as such.
 */
const SHORT_TIMEOUTS: SmtpTimeouts = { connectionMs: 500, greetingMs: 300, socketMs: 600 };
/** "At once" for a sign-up while SMTP is down: it never waits for the SMTP server. */
const AT_ONCE_MS = 1_000;
/** Code lifetime here: the default (900 s); the expiry test moves the clock past it. */
const CODE_TTL_SECONDS = 900;

let ctx: TestContext;
let cert: SelfSignedCertificate;
/** Offers STARTTLS with the self-signed certificate. */
let starttlsServer: FaultSmtpServer;
/** Implicit TLS (SMTPS) with the self-signed certificate. */
let tlsServer: FaultSmtpServer;
/** Workers made by a test, stopped after it. */
const extraWorkers: { worker: OutboxWorker; close: () => void }[] = [];

beforeAll(async () => {
  cert = createSelfSignedCertificate();
  starttlsServer = await startFaultSmtpServer({ tls: { key: cert.key, cert: cert.cert } });
  tlsServer = await startFaultSmtpServer({ tls: { key: cert.key, cert: cert.cert, implicitTls: true } });
  // The app itself is configured the way an operator would: STARTTLS with SMTP_CA_FILE.
  ctx = await createTestContext({ SMTP_PORT: String(starttlsServer.port), SMTP_TLS: 'starttls', SMTP_CA_FILE: cert.certFile });
  // Rounds run only when a test asks: no background round races a test's worker.
  await ctx.app.outbox.stop();
});
afterEach(async () => {
  for (const { worker, close } of extraWorkers.splice(0)) {
    await worker.stop();
    close();
  }
  // Each test leaves no pending row behind for the next test's worker to pick up.
  await ctx.db.query(`UPDATE email_outbox SET status = 'cancelled' WHERE status = 'pending'`);
});
afterAll(async () => {
  await ctx?.close();
  await starttlsServer?.close();
  await tlsServer?.close();
  cert?.remove();
});

/**
 * An outbox worker on the test database whose transport is built from SMTP settings exactly as
 * buildApp builds it (`createSmtpTransport(config.smtp, { ca: config.smtp.ca })`).
 */
function workerFor(env: Record<string, string>, timeouts?: SmtpTimeouts): OutboxWorker {
  const smtp = loadConfig({ SMTP_HOST: '127.0.0.1', SMTP_FROM: 'auth@example.test', ...env }).smtp!;
  const transport = createSmtpTransport(smtp, { ca: smtp.ca, timeouts });
  const worker = createOutboxWorker({ db: ctx.db, transport, clock: ctx.clock, log: ctx.app.log });
  extraWorkers.push({ worker, close: () => transport.close() });
  return worker;
}

interface Row {
  id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  next_attempt_at: Date;
  lease_owner: string | null;
  payload: { code?: string };
}

async function rowOf(email: string): Promise<Row> {
  const { rows } = await ctx.db.query<Row>('SELECT * FROM email_outbox WHERE recipient = $1', [email]);
  expect(rows).toHaveLength(1);
  return rows[0]!;
}

async function newSignUp(): Promise<string> {
  const { res, body } = await signUp(ctx);
  expect(res.statusCode, res.body).toBe(201);
  return body.user.email!;
}

function receivedBy(server: TestSmtpServer | FaultSmtpServer, email: string): number {
  return server.messages.filter((m) => m.to.includes(email)).length;
}

/** Asserts a failed, retryable attempt: pending, one attempt, error recorded, code kept, a retry scheduled. */
async function expectRetried(email: string, error: RegExp): Promise<Row> {
  const row = await rowOf(email);
  expect(row).toMatchObject({ status: 'pending', attempts: 1, lease_owner: null });
  expect(row.last_error).toMatch(error);
  expect(row.payload.code).toMatch(/^[0-9]{6}$/);
  expect(row.next_attempt_at.getTime()).toBeGreaterThan(ctx.clock.now().getTime());
  return row;
}

describe('SMTP_CA_FILE', () => {
  it('is read at start into the SMTP settings; a missing file or one without a valid certificate is a configuration error', () => {
    const base = { SMTP_HOST: 'mail.example.com', SMTP_FROM: 'no-reply@example.com' };
    expect(loadConfig({ ...base, SMTP_CA_FILE: cert.certFile }).smtp?.ca).toBe(cert.cert);
    expect(loadConfig(base).smtp?.ca).toBeUndefined();

    const notPem = path.join(cert.dir, 'not-a-cert.pem');
    writeFileSync(notPem, 'hello\n');
    const broken = path.join(cert.dir, 'broken.pem');
    writeFileSync(broken, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    for (const [file, problem] of [
      [path.join(cert.dir, 'missing.pem'), /SMTP_CA_FILE: cannot read .*ENOENT/],
      [notPem, /SMTP_CA_FILE: .* holds no PEM certificate/],
      [broken, /SMTP_CA_FILE: certificate 1 in .* is not a valid X\.509 certificate/],
    ] as const) {
      let thrown: unknown;
      try {
        loadConfig({ ...base, SMTP_CA_FILE: file });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).problems).toEqual([expect.stringMatching(problem)]);
    }
  });
});

describe('SMTP TLS modes against a server with a self-signed certificate', () => {
  it('starttls with SMTP_CA_FILE (the app as configured): upgraded, certificate verified, delivered once', async () => {
    const before = starttlsServer.handshakes;
    const email = await newSignUp();
    await ctx.app.outbox.runOnce();
    expect(receivedBy(starttlsServer, email)).toBe(1);
    expect((await rowOf(email)).status).toBe('sent');
    expect(starttlsServer.handshakes).toBe(before + 1);
  });

  it('starttls without the CA: the unknown issuer fails the attempt, which is retried and succeeds once the CA is trusted', async () => {
    const email = await newSignUp();
    await workerFor({ SMTP_PORT: String(starttlsServer.port), SMTP_TLS: 'starttls' }).runOnce();
    expect(receivedBy(starttlsServer, email)).toBe(0);
    const failed = await expectRetried(email, /self[- ]signed certificate/i);

    // The operator adds SMTP_CA_FILE: the same row is retried when due and delivered.
    ctx.clock.advance((failed.next_attempt_at.getTime() - ctx.clock.now().getTime()) / 1000);
    await workerFor({ SMTP_PORT: String(starttlsServer.port), SMTP_TLS: 'starttls', SMTP_CA_FILE: cert.certFile }).runOnce();
    expect(receivedBy(starttlsServer, email)).toBe(1);
    expect(await rowOf(email)).toMatchObject({ status: 'sent', attempts: 2 });
  });

  it('starttls against a server that offers no STARTTLS: never sent in plain (no downgrade); its 5xx to STARTTLS is retried, not dead', async () => {
    const email = await newSignUp();
    // ctx.smtp is the plain server of the test context (STARTTLS disabled): it answers 500.
    await workerFor({ SMTP_PORT: String(ctx.smtp.port), SMTP_TLS: 'starttls', SMTP_CA_FILE: cert.certFile }).runOnce();
    expect(receivedBy(ctx.smtp, email)).toBe(0);
    await expectRetried(email, /ETLS 500 .*STARTTLS/);
  });

  it('none: delivered in plain although the server offers STARTTLS (never upgrades)', async () => {
    const before = starttlsServer.handshakes;
    const email = await newSignUp();
    await workerFor({ SMTP_PORT: String(starttlsServer.port), SMTP_TLS: 'none' }).runOnce();
    expect(receivedBy(starttlsServer, email)).toBe(1);
    expect((await rowOf(email)).status).toBe('sent');
    expect(starttlsServer.handshakes).toBe(before);
  });

  it('tls (implicit) without the CA fails and is retried; with SMTP_CA_FILE it is delivered over TLS', async () => {
    const before = tlsServer.handshakes;
    const email = await newSignUp();
    await workerFor({ SMTP_PORT: String(tlsServer.port), SMTP_TLS: 'tls' }).runOnce();
    expect(receivedBy(tlsServer, email)).toBe(0);
    const failed = await expectRetried(email, /self[- ]signed certificate/i);
    expect(tlsServer.handshakes).toBe(before);

    ctx.clock.advance((failed.next_attempt_at.getTime() - ctx.clock.now().getTime()) / 1000);
    await workerFor({ SMTP_PORT: String(tlsServer.port), SMTP_TLS: 'tls', SMTP_CA_FILE: cert.certFile }).runOnce();
    expect(receivedBy(tlsServer, email)).toBe(1);
    expect(await rowOf(email)).toMatchObject({ status: 'sent', attempts: 2 });
    expect(tlsServer.handshakes).toBe(before + 1);
  });
});

describe('a server that accepts and never answers', () => {
  let silent: Server;
  const held: Socket[] = [];
  beforeAll(async () => {
    silent = createServer((socket) => {
      held.push(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    for (const s of held) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('no greeting: the attempt times out (bounded), is recorded and retried; the server answering later gets the email', async () => {
    const email = await newSignUp();
    const started = Date.now();
    await workerFor({ SMTP_PORT: String((silent.address() as AddressInfo).port), SMTP_TLS: 'none' }, SHORT_TIMEOUTS).runOnce();
    // Bounded by the greeting timeout (plus scheduling slack), not by the server.
    expect(Date.now() - started).toBeLessThan(SHORT_TIMEOUTS.greetingMs + AT_ONCE_MS);
    expect(held.length).toBeGreaterThan(0);
    const failed = await expectRetried(email, /ETIMEDOUT.*Greeting never received/);

    ctx.clock.advance((failed.next_attempt_at.getTime() - ctx.clock.now().getTime()) / 1000);
    await workerFor({ SMTP_PORT: String(ctx.smtp.port), SMTP_TLS: 'none' }).runOnce();
    expect(receivedBy(ctx.smtp, email)).toBe(1);
    expect(await rowOf(email)).toMatchObject({ status: 'sent', attempts: 2 });
  });

  it('no answer to the message data: the socket timeout fails the attempt, which is retried with the same Message-ID', async () => {
    // Greets and takes the envelope, then never answers the data (a relay stuck on its queue).
    const stuck = await startFaultSmtpServer({ stalled: true });
    try {
      const email = await newSignUp();
      const id = (await rowOf(email)).id;
      await workerFor({ SMTP_PORT: String(stuck.port), SMTP_TLS: 'none' }, SHORT_TIMEOUTS).runOnce();
      const failed = await expectRetried(email, /ETIMEDOUT.*Timeout/);
      expect(failed.id).toBe(id);
      expect(stuck.stalledCount).toBe(1);
      expect(stuck.messages).toHaveLength(0);

      ctx.clock.advance((failed.next_attempt_at.getTime() - ctx.clock.now().getTime()) / 1000);
      await workerFor({ SMTP_PORT: String(ctx.smtp.port), SMTP_TLS: 'none' }).runOnce();
      const mails = ctx.smtp.messages.filter((m) => m.to.includes(email));
      expect(mails).toHaveLength(1);
      expect(messageIdOf(mails[0]!.raw)).toBe(`<${id}@latchkey>`);
    } finally {
      await stuck.close();
    }
  });
});

/** A loopback port where nothing listens (every connection is refused). */
async function refusedPort(): Promise<number> {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  return port;
}

describe('the SMTP server down at sign-up, then back', () => {
  it('sign-up answers 201 at once; the refused attempt is retried and the email delivered later with its Message-ID', async () => {
    const port = await refusedPort();
    const started = Date.now();
    const email = await newSignUp();
    expect(Date.now() - started).toBeLessThan(AT_ONCE_MS);
    const id = (await rowOf(email)).id;
    await workerFor({ SMTP_PORT: String(port), SMTP_TLS: 'none' }).runOnce();
    const failed = await expectRetried(email, /ECONNREFUSED/);

    ctx.clock.advance((failed.next_attempt_at.getTime() - ctx.clock.now().getTime()) / 1000);
    await workerFor({ SMTP_PORT: String(ctx.smtp.port), SMTP_TLS: 'none' }).runOnce();
    const mails = ctx.smtp.messages.filter((m) => m.to.includes(email));
    expect(mails).toHaveLength(1);
    expect(messageIdOf(mails[0]!.raw)).toBe(`<${id}@latchkey>`);
    expect(await rowOf(email)).toMatchObject({ status: 'sent', attempts: 2 });
  });
});

describe('a code that expires while its email is being retried', () => {
  it('is never sent: the row is cancelled and its code removed when the server comes back', async () => {
    const deadPort = await refusedPort();
    const email = await newSignUp();
    await workerFor({ SMTP_PORT: String(deadPort), SMTP_TLS: 'none' }).runOnce();
    await expectRetried(email, /ECONNREFUSED/);

    // The server comes back only after the code's lifetime, when the row is long due for its retry.
    ctx.clock.advance(CODE_TTL_SECONDS);
    await workerFor({ SMTP_PORT: String(ctx.smtp.port), SMTP_TLS: 'none' }).runOnce();
    expect(receivedBy(ctx.smtp, email)).toBe(0);
    const row = await rowOf(email);
    expect(row.status).toBe('cancelled');
    expect(row.payload.code).toBeUndefined();
  });
});

describe('which SMTP failures are permanent (dead at once)', () => {
  it('a 5xx to MAIL FROM, RCPT TO or DATA (the message); not a 5xx to EHLO, STARTTLS or AUTH (configuration), nor a 4xx or a timeout', () => {
    for (const command of ['MAIL FROM', 'RCPT TO', 'DATA', undefined]) expect(isPermanentSmtpFailure({ responseCode: 550, command }), String(command)).toBe(true);
    for (const command of ['EHLO', 'STARTTLS', 'AUTH PLAIN', 'AUTH LOGIN', 'CONN']) expect(isPermanentSmtpFailure({ responseCode: 535, command }), command).toBe(false);
    expect(isPermanentSmtpFailure({ responseCode: 451, command: 'DATA' })).toBe(false);
    expect(isPermanentSmtpFailure({ command: 'CONN' })).toBe(false);
  });
});
