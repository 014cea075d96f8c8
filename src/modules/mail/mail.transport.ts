import nodemailer from 'nodemailer';
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
   * @throws {MailSendError} with `permanent` true for an SMTP 5xx reply (no retry), false otherwise.
   */
  send(message: MailMessage): Promise<void>;
  close(): void;
}

/** A failed delivery; `permanent` decides between retry with backoff and dead (decisions.md §8). */
export class MailSendError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
    this.name = 'MailSendError';
  }
}

/** SMTP timeouts in milliseconds: a server that accepts and never answers fails in bounded time. */
const SMTP_CONNECTION_TIMEOUT_MS = 10_000;
const SMTP_GREETING_TIMEOUT_MS = 10_000;
const SMTP_SOCKET_TIMEOUT_MS = 20_000;
/** Longest error text kept in `email_outbox.last_error`. */
const MAX_ERROR_LENGTH = 500;

/** Options for {@link createSmtpTransport} beyond the configuration. */
export interface SmtpTransportOptions {
  /** Extra CA certificates (PEM) to trust, for servers with a private CA. */
  readonly ca?: string | undefined;
}

/**
 * Sends through SMTP with nodemailer: `none` never upgrades, `starttls` requires the STARTTLS
 * upgrade, `tls` uses implicit TLS (decisions.md §2). Credentials are used only when set.
 */
export function createSmtpTransport(smtp: SmtpConfig, options: SmtpTransportOptions = {}): MailTransport {
  const transporter = nodemailer.createTransport({
    host: smtp.host,
    port: smtp.port,
    secure: smtp.tls === 'tls',
    requireTLS: smtp.tls === 'starttls',
    ignoreTLS: smtp.tls === 'none',
    ...(smtp.username !== undefined && smtp.password !== undefined ? { auth: { user: smtp.username, pass: smtp.password } } : {}),
    connectionTimeout: SMTP_CONNECTION_TIMEOUT_MS,
    greetingTimeout: SMTP_GREETING_TIMEOUT_MS,
    socketTimeout: SMTP_SOCKET_TIMEOUT_MS,
    ...(options.ca !== undefined ? { tls: { ca: options.ca } } : {}),
  });
  const from = smtp.fromName === undefined ? smtp.from : { name: smtp.fromName, address: smtp.from };
  return {
    kind: 'smtp',
    async send(message) {
      try {
        await transporter.sendMail({ from, to: message.to, subject: message.subject, text: message.text, messageId: message.messageId });
      } catch (err) {
        const e = err as { responseCode?: number; code?: string; message?: string };
        const permanent = typeof e.responseCode === 'number' && e.responseCode >= 500 && e.responseCode < 600;
        const text = [e.code, e.responseCode, e.message].filter((x) => x !== undefined).join(' ');
        throw new MailSendError(text.slice(0, MAX_ERROR_LENGTH), permanent);
      }
    },
    close: () => transporter.close(),
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
