import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import type { ReceivedMail } from '../../helpers/smtp.js';

/** Options of {@link startFaultSmtpServer}. */
export interface FaultSmtpOptions {
  /** Start stalled (see {@link FaultSmtpServer.stalled}). */
  readonly stalled?: boolean;
  /** PEM key and certificate: with them the server offers STARTTLS, or speaks implicit TLS when `implicitTls`. */
  readonly tls?: { readonly key: string; readonly cert: string; readonly implicitTls?: boolean };
}

/**
 * A real SMTP server (`smtp-server`) on 127.0.0.1 for fault tests. It can stall: while `stalled`
 * is true it takes a message's data and never answers (the client waits until its socket
 * timeout, or dies waiting). Only messages it answered 250 are recorded, i.e. those the sender
 * knows were delivered. With `tls` it offers STARTTLS (or implicit TLS) and counts handshakes.
 */
export interface FaultSmtpServer {
  readonly port: number;
  readonly messages: ReceivedMail[];
  stalled: boolean;
  /** How many messages arrived while stalled (never answered, not recorded). */
  readonly stalledCount: number;
  /** How many TLS handshakes completed (STARTTLS upgrades or implicit-TLS connections). */
  readonly handshakes: number;
  /** The Message-ID header of every recorded message, in arrival order. */
  messageIds(): string[];
  close(): Promise<void>;
}

/** Longest time close() waits for clients to hang up before dropping them, in milliseconds. */
const CLOSE_TIMEOUT_MS = 1_000;

/** Starts a {@link FaultSmtpServer} on an ephemeral loopback port. */
export async function startFaultSmtpServer(options: FaultSmtpOptions = {}): Promise<FaultSmtpServer> {
  const messages: ReceivedMail[] = [];
  let stalledCount = 0;
  let handshakes = 0;
  const tlsOptions: Partial<SMTPServerOptions> =
    options.tls === undefined
      ? { disabledCommands: ['STARTTLS', 'AUTH'] }
      : { disabledCommands: ['AUTH'], key: options.tls.key, cert: options.tls.cert, secure: options.tls.implicitTls ?? false };
  const server = new SMTPServer({
    authOptional: true,
    logger: false,
    closeTimeout: CLOSE_TIMEOUT_MS,
    ...tlsOptions,
    onSecure(_socket, _session, callback) {
      handshakes++;
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (state.stalled) {
          stalledCount++;
          return;
        }
        messages.push({ to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks).toString('utf8') });
        callback();
      });
    },
  });
  // A client that gives up on the TLS handshake (unknown issuer) makes the server emit 'error'.
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const state: FaultSmtpServer = {
    port: (server.server.address() as AddressInfo).port,
    messages,
    stalled: options.stalled ?? false,
    get stalledCount() {
      return stalledCount;
    },
    get handshakes() {
      return handshakes;
    },
    messageIds: () => messages.map((m) => messageIdOf(m.raw)),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return state;
}

/** The Message-ID header of a raw message (throws when it has none). */
export function messageIdOf(raw: string): string {
  const m = /^Message-ID:\s*(<[^>]+>)/im.exec(raw);
  if (m === null) throw new Error(`no Message-ID in:\n${raw}`);
  return m[1]!;
}
