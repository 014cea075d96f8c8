import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/**
 * What the proxy does with traffic:
 * - `forward`: pipes each connection to the target (normal operation);
 * - `reset`: destroys every open connection at once and every new one on arrival (a database
 *   that went away, or a cut network that answers with resets);
 * - `blackhole`: keeps every connection open but forwards nothing in either direction, and
 *   accepts new ones without ever connecting them (a silent network: no reset, no answer).
 */
export type ProxyMode = 'forward' | 'reset' | 'blackhole';

/** A TCP proxy on 127.0.0.1 in front of `target`, whose connection can be cut and restored. */
export interface TcpProxy {
  readonly port: number;
  /** Switches the mode; `reset` also destroys the open connections, `blackhole` stops forwarding on them. */
  setMode(mode: ProxyMode): void;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Bytes written to the target so far, over every connection (held-back bytes count once delivered). */
  readonly forwardedBytes: number;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  server: Socket | undefined;
}

/**
 * Starts a {@link TcpProxy} on an ephemeral loopback port that forwards to `target`
 * (127.0.0.1 only: the tests never reach beyond the machine).
 */
export async function startTcpProxy(target: { port: number }): Promise<TcpProxy> {
  let mode: ProxyMode = 'forward';
  let accepted = 0;
  /** Bytes written to the target by upstream connections that have closed. */
  let closedForwardedBytes = 0;
  const pairs = new Set<Pair>();

  const destroy = (pair: Pair): void => {
    pair.client.destroy();
    pair.server?.destroy();
    pairs.delete(pair);
  };
  const silence = (pair: Pair): void => {
    pair.client.unpipe();
    pair.server?.unpipe();
    pair.client.pause();
    pair.server?.pause();
  };

  /** Pipes a pair both ways, connecting it upstream first if it has no upstream yet. */
  const forward = (pair: Pair): void => {
    if (pair.server === undefined) {
      const upstream = connect({ host: '127.0.0.1', port: target.port });
      pair.server = upstream;
      upstream.on('error', () => destroy(pair));
      upstream.on('close', () => {
        closedForwardedBytes += upstream.bytesWritten;
        destroy(pair);
      });
    }
    pair.client.pipe(pair.server);
    pair.server.pipe(pair.client);
  };

  const server = createServer((client) => {
    accepted++;
    const pair: Pair = { client, server: undefined };
    client.on('error', () => destroy(pair));
    // The client closed: what it sent still reaches the target, then the close (TCP delivers the
    // data before the FIN), so the upstream is ended, not destroyed; its own 'close' cleans up.
    client.on('close', () => (pair.server === undefined || pair.server.destroyed ? destroy(pair) : pair.server.end()));
    if (mode === 'reset') {
      client.resetAndDestroy();
      return;
    }
    pairs.add(pair);
    if (mode === 'blackhole') {
      client.pause();
      return;
    }
    forward(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  return {
    port: (server.address() as AddressInfo).port,
    get accepted() {
      return accepted;
    },
    get forwardedBytes() {
      return closedForwardedBytes + [...pairs].reduce((sum, pair) => sum + (pair.server?.bytesWritten ?? 0), 0);
    },
    setMode(next) {
      const previous = mode;
      mode = next;
      if (next === previous) return;
      for (const pair of [...pairs]) {
        if (next === 'reset') {
          pair.client.resetAndDestroy();
          pair.server?.destroy();
          pairs.delete(pair);
        } else if (next === 'blackhole') silence(pair);
        // Back to `forward`: like a network that heals, what was held back flows on (TCP
        // would retransmit it) and connections accepted meanwhile reach the target, unless
        // their peer has given up on them and closed them already.
        else if (previous === 'blackhole') forward(pair);
      }
    },
    async close() {
      for (const pair of [...pairs]) destroy(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
