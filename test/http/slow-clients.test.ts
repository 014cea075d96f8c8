import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, REQUEST_TIMEOUT_MS, TIMEOUT_CHECK_INTERVAL_MS } from '../../src/plugins/http-hardening.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

/**
 * Slow clients are cut off (docs/decisions.md, "HTTP hardening"): a real listener on 127.0.0.1 and
 * raw sockets that send a request a byte at a time. Each case runs until the server closes the
 * connection; none sends more than a few hundred bytes.
 */

/** What the issue of slow clients requires: dropped within 30 s. */
const MUST_DROP_WITHIN_MS = 30_000;
/** Pause between the bytes a trickling client sends: shorter than the idle timeout, so only the request timeouts can end it. */
const TRICKLE_EVERY_MS = 2_500;

let ctx: TestContext;
let port: number;
beforeAll(async () => {
  ctx = await createTestContext();
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  port = (ctx.app.server.address() as AddressInfo).port;
});
afterAll(async () => ctx?.close());

/**
 * Opens a connection, writes `head` at once and then `trickle` one byte every
 * {@link TRICKLE_EVERY_MS}; resolves when the server closes the connection, with how long that
 * took and what the server wrote.
 */
function trickle(head: string, trickleText: string): Promise<{ ms: number; received: string }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket: Socket = connect(port, '127.0.0.1');
    let received = '';
    let i = 0;
    const timer = setInterval(() => {
      if (i < trickleText.length && socket.writable) socket.write(trickleText[i++]!);
    }, TRICKLE_EVERY_MS);
    const done = () => {
      clearInterval(timer);
      resolve({ ms: Date.now() - started, received });
    };
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('close', done);
    socket.on('error', () => undefined);
    socket.on('connect', () => socket.write(head));
    setTimeout(() => {
      clearInterval(timer);
      socket.destroy();
      reject(new Error(`connection still open after ${MUST_DROP_WITHIN_MS + 10_000} ms; received ${JSON.stringify(received)}`));
    }, MUST_DROP_WITHIN_MS + 10_000);
  });
}

describe('slow clients', () => {
  it('the timeouts are set as documented', () => {
    const server = ctx.app.server;
    expect(server.headersTimeout).toBe(HEADERS_TIMEOUT_MS);
    expect(server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
    expect(server.keepAliveTimeout).toBe(KEEP_ALIVE_TIMEOUT_MS);
    expect(REQUEST_TIMEOUT_MS + TIMEOUT_CHECK_INTERVAL_MS).toBeLessThan(MUST_DROP_WITHIN_MS);
  });

  it(
    'a body trickling in a byte every few seconds, and headers trickling in the same way, are answered 408 and dropped within 30 s',
    async () => {
      const body = JSON.stringify({ username: 'slowloris', password: 'x'.repeat(40) });
      const [slowBody, slowHeaders] = await Promise.all([
        trickle(`POST /auth/v0/sign-in HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, body),
        trickle('GET /auth/v0/.well-known/jwks.json HTTP/1.1\r\nHost: 127.0.0.1\r\n', 'X-Slow: ' + 'a'.repeat(40)),
      ]);
      for (const outcome of [slowBody, slowHeaders]) {
        expect(outcome.ms).toBeLessThan(MUST_DROP_WITHIN_MS);
        expect(outcome.received).toMatch(/^HTTP\/1\.1 408 /);
      }
      expect(slowHeaders.ms).toBeLessThan(HEADERS_TIMEOUT_MS + TIMEOUT_CHECK_INTERVAL_MS + 1_000);
    },
    MUST_DROP_WITHIN_MS + 15_000,
  );
});

describe('bodies on GET', () => {
  /**
   * Writes `request` on one connection and resolves with what the server wrote once `answers`
   * answers with a JSON body have arrived, or the connection closed.
   */
  function exchange(request: Buffer, answers: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      const finish = () => {
        clearTimeout(timer);
        socket.destroy();
        resolve(received);
      };
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no ${answers} answers within 10 s; received ${JSON.stringify(received.slice(0, 200))}`));
      }, 10_000);
      socket.on('data', (chunk) => {
        received += chunk.toString('latin1');
        if ((received.match(/HTTP\/1\.1 \d{3} /g) ?? []).length >= answers && received.endsWith('}')) finish();
      });
      socket.on('close', finish);
      socket.on('error', () => undefined);
      socket.on('connect', () => socket.write(request));
    });
  }

  it('a GET body over the limit is never read: it is discarded, the route answers, and the connection serves the next request', async () => {
    const body = Buffer.alloc(1024 * 1024, 'x');
    const head = `GET /auth/v0/.well-known/jwks.json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n`;
    const next = 'GET /auth/v0/.well-known/jwks.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
    const received = await exchange(Buffer.concat([Buffer.from(head), body, Buffer.from(next)]), 2);
    const statuses = received.match(/HTTP\/1\.1 \d{3}/g);
    expect(statuses, received.slice(0, 300)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200']);
    expect(received).not.toContain('body_too_large');
  });
});
