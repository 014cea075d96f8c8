import { rootCertificates } from 'node:tls';
import type { Transporter } from 'nodemailer';
import type { FastifyBaseLogger } from 'fastify';
import type { SmtpConfig } from '../../config.js';

/** One rendered email, ready to send. `messageId` is stable per outbox row, so a resend after a crash is recognisable. */
export interface MailMessage {
  readonly messageId: string;
  readonly to: string;
  readonly subject: string;
  readonly text: string;
}

/** "How to send" (the mailer decides "what to send"); Supabase Auth keeps the two apart too. */
export interface MailTransport {
  readonly kind: 'smtp' | 'log';
  /**
   * Delivers one message.
   * @throws {MailSendError} with `permanent` true for an SMTP 5xx reply to the message itself
   *   (no retry), false otherwise (see {@link isPermanentSmtpFailure}).
   */
  send(message: MailMessage): Promise<void>;
  close(): void;
}

/** A failed delivery; `permanent` decides between retry with backoff and dead (docs/decisions.md#email-outbox). */
export class MailSendError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
    this.name = 'MailSendError';
  }
}

/**
 * SMTP timeouts in milliseconds, so that a server that accepts and never answers fails in
 * bounded time (a transient failure, retried): connecting, waiting for the greeting, and
 * inactivity on an open connection. Their sum stays below the outbox lease (60 s).
 */
export interface SmtpTimeouts {
  readonly connectionMs: number;
  readonly greetingMs: number;
  readonly socketMs: number;
}

/** Production timeouts: generous for a slow relay, short enough to retry a hung one soon. */
export const SMTP_TIMEOUTS: SmtpTimeouts = Object.freeze({ connectionMs: 10_000, greetingMs: 10_000, socketMs: 20_000 });
/**
 * The SMTP commands that carry the message (RFC 5321 §3.3: envelope and content). A 5xx reply to
 * one of them refuses this message (no such mailbox, content rejected): retrying cannot help.
 */
const MESSAGE_COMMANDS: ReadonlySet<string> = new Set(['MAIL FROM', 'RCPT TO', 'DATA']);

/**
 * Whether a nodemailer failure is permanent for the message (docs/decisions.md#email-outbox: dead at once):
 * an SMTP 5xx reply to MAIL FROM, RCPT TO or DATA, or a 5xx whose command nodemailer does not
 * name. A 5xx to the session set-up (EHLO, STARTTLS, AUTH: a relay without STARTTLS, wrong
 * credentials) is a configuration fault of the relay or of this service, not of the message:
 * it is retried with backoff like a 4xx, so the emails queued meanwhile are delivered once the
 * configuration is fixed (or die after the 10th attempt). Everything without a 5xx (timeouts,
 * refused connections, TLS verification) is transient.
 */
export function isPermanentSmtpFailure(err: { responseCode?: number | undefined; command?: string | undefined }): boolean {
  const is5xx = typeof err.responseCode === 'number' && err.responseCode >= 500 && err.responseCode < 600;
  return is5xx && (err.command === undefined || MESSAGE_COMMANDS.has(err.command));
}

/** Longest error text kept in `email_outbox.last_error`. */
const MAX_ERROR_LENGTH = 500;

/** Options for {@link createSmtpTransport} beyond the configuration. */
export interface SmtpTransportOptions {
  /**
   * Extra CA certificates (PEM, `SMTP_CA_FILE`) to trust for the server's certificate, in
   * addition to Node's bundled Mozilla roots, for servers with a private CA or a self-signed
   * certificate. The host name is still checked against the certificate.
   */
  readonly ca?: string | undefined;
  /** Overrides {@link SMTP_TIMEOUTS}; tests shorten them to provoke a timeout without waiting. */
  readonly timeouts?: SmtpTimeouts | undefined;
}

/**
 * Sends through SMTP with nodemailer: `none` never upgrades (even when the server offers
 * STARTTLS), `starttls` requires the STARTTLS upgrade, `tls` uses implicit TLS (decisions.md
 * §2). With `starttls` and `tls` the server's certificate must verify (bundled roots, plus
 * `options.ca`); a failure is a transient `MailSendError`, retried. Credentials are used only
 * when set.
 */
export function createSmtpTransport(smtp: SmtpConfig, options: SmtpTransportOptions = {}): MailTransport {
  const timeouts = options.timeouts ?? SMTP_TIMEOUTS;
  const settings = {
    host: smtp.host,
    port: smtp.port,
    secure: smtp.tls === 'tls',
    requireTLS: smtp.tls === 'starttls',
    ignoreTLS: smtp.tls === 'none',
    ...(smtp.username !== undefined && smtp.password !== undefined ? { auth: { user: smtp.username, pass: smtp.password } } : {}),
    connectionTimeout: timeouts.connectionMs,
    greetingTimeout: timeouts.greetingMs,
    socketTimeout: timeouts.socketMs,
    // Node's `ca` replaces the default roots; keep them so a public relay still verifies.
    ...(options.ca !== undefined ? { tls: { ca: [...rootCertificates, options.ca] } } : {}),
  };
  // nodemailer is loaded on the first send, not at start (about 35 ms of a start, docs/performance.md).
  let transporter: Promise<Transporter> | undefined;
  const connect = (): Promise<Transporter> => (transporter ??= import('nodemailer').then(({ default: nodemailer }) => nodemailer.createTransport(settings)));
  const from = smtp.fromName === undefined ? smtp.from : { name: smtp.fromName, address: smtp.from };
  return {
    kind: 'smtp',
    async send(message) {
      try {
        await (await connect()).sendMail({ from, to: message.to, subject: message.subject, text: message.text, messageId: message.messageId });
      } catch (err) {
        const e = err as { responseCode?: number; code?: string; message?: string; command?: string };
        const permanent = isPermanentSmtpFailure(e);
        const text = [e.code, e.responseCode, e.message].filter((x) => x !== undefined).join(' ');
        throw new MailSendError(text.slice(0, MAX_ERROR_LENGTH), permanent);
      }
    },
    close: () => void transporter?.then((t) => t.close(), () => undefined),
  };
}

/**
 * The development transport used when SMTP_HOST is unset: writes each email, code included,
 * to the log at `warn` (so it shows at every usual LOG_LEVEL) for a developer to verify an
 * address locally.
 * Never use it in production: the start-up warning says so.
 */
export function createLogTransport(log: FastifyBaseLogger): MailTransport {
  return {
    kind: 'log',
    async send(message) {
      log.warn({ email: { messageId: message.messageId, to: message.to, subject: message.subject, text: message.text } }, 'email written to the log (SMTP_HOST is not set)');
    },
    close: () => {},
  };
}
