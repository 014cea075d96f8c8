import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';

/** One message as the SMTP server received it. */
export interface ReceivedMail {
  readonly to: string[];
  readonly raw: string;
}

/** A real SMTP server on a loopback port, recording what it receives. */
export interface TestSmtpServer {
  readonly port: number;
  readonly messages: ReceivedMail[];
  /**
   * Decides the reply to each DATA command: undefined accepts, a number rejects with that
   * SMTP code (for example 451 or 550). Replace it to script faults.
   */
  reply: (message: ReceivedMail) => number | undefined;
  close(): Promise<void>;
}

/**
 * Starts an `smtp-server` on 127.0.0.1 with an ephemeral port. Without `options`, it speaks
 * plain SMTP (no STARTTLS, no AUTH), matching `SMTP_TLS=none`.
 */
export async function startSmtpServer(options: Partial<SMTPServerOptions> = {}): Promise<TestSmtpServer> {
  const messages: ReceivedMail[] = [];
  const state: TestSmtpServer = {
    port: 0,
    messages,
    reply: () => undefined,
    close: async () => {},
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    ...options,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const mail = { to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks).toString('utf8') };
        const code = state.reply(mail);
        if (code === undefined) {
          messages.push(mail);
          callback();
        } else {
          const err = new Error(`scripted failure ${code}`) as Error & { responseCode: number };
          err.responseCode = code;
          callback(err);
        }
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  (state as { port: number }).port = (server.server.address() as AddressInfo).port;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}

/** The 6-digit code in a verification email. */
export function codeFrom(mail: ReceivedMail): string {
  const m = /verification code is (\d{6})/.exec(mail.raw);
  if (m === null) throw new Error(`no code in message:\n${mail.raw}`);
  return m[1]!;
}
