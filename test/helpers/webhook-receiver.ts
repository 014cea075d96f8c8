import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a {@link WebhookReceiver} got. */
export interface ReceivedWebhook {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The body exactly as received (what a signature covers). */
  readonly body: string;
  /** The body parsed as JSON. */
  readonly json: { type: string; timestamp: string; data: Record<string, unknown> };
}

/** How the receiver answers one request. */
export interface Answer {
  readonly status: number;
  readonly headers?: Record<string, string>;
  /** Milliseconds to wait before answering. */
  readonly delayMs?: number;
}

/** A real HTTP server on 127.0.0.1 that records webhook requests and answers as told. */
export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** The origin with a path of its own, so several endpoints can share one receiver. */
  url(path?: string): string;
  readonly received: ReceivedWebhook[];
  /** The answer of every request not answered by {@link answerNext} (default 204). */
  answer: Answer;
  /** Queues answers for the next requests, in order, before {@link answer} applies again. */
  answerNext(...answers: Answer[]): void;
  /** The requests to `path`. */
  to(path: string): ReceivedWebhook[];
  close(): Promise<void>;
}

/** Starts a {@link WebhookReceiver} on 127.0.0.1 and a free port. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const queue: Answer[] = [];
  const received: ReceivedWebhook[] = [];
  const state: { answer: Answer } = { answer: { status: 204 } };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: ReceivedWebhook['json'];
      try {
        json = JSON.parse(body) as ReceivedWebhook['json'];
      } catch {
        json = { type: '', timestamp: '', data: {} };
      }
      received.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, json });
      const answer = queue.shift() ?? state.answer;
      const send = (): void => {
        res.writeHead(answer.status, answer.headers ?? {});
        res.end();
      };
      if (answer.delayMs === undefined) send();
      else setTimeout(send, answer.delayMs).unref();
    });
  });
  // Closed connections must not hold close() up (keep-alive sockets of the service's agent).
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    url: (path = '/hook') => `${origin}${path}`,
    received,
    get answer() {
      return state.answer;
    },
    set answer(a: Answer) {
      state.answer = a;
    },
    answerNext: (...answers) => void queue.push(...answers),
    to: (path) => received.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
