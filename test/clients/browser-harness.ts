import { existsSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { build } from 'esbuild';
import type { CDPSession } from 'playwright-core';
import { latchkeyMiddleware } from '../../packages/verify/src/express.js';
import { createVerifier } from '../../packages/verify/src/index.js';
import { WallClock } from '../helpers/clock.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

/** A host name that is not localhost, for a page over plain HTTP that is no secure context (no WebAuthn, no Web Locks). */
export const INSECURE_HOST = 'insecure.test';
/**
 * Debian's chromium package; test/e2e/demo.test.ts explains the flags. The pages are opened at
 * `http://localhost:<port>` (a secure context, and a domain for WebAuthn's RP ID), and the
 * tests reach loopback only: localhost, and INSECURE_HOST, resolve to 127.0.0.1, where the servers listen.
 */
export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  `--host-resolver-rules=MAP localhost 127.0.0.1, MAP ${INSECURE_HOST} 127.0.0.1`,
];
/** Without Chromium the browser tests are skipped, except in CI, where they must run (and fail). */
export const SKIP_BROWSER = !existsSync(CHROMIUM) && !process.env.CI;

/**
 * A TCP port free on 127.0.0.1 now (the system's pick for port 0), for a server whose
 * configuration must name its own origin before it listens (WEBAUTHN_ORIGINS).
 */
export async function freePort(): Promise<number> {
  const probe = createNetServer();
  await new Promise<void>((resolve, reject) => probe.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/**
 * The WebAuthn virtual authenticator of Chromium's DevTools protocol on one page: a platform
 * authenticator (CTAP2, internal) that keeps discoverable credentials, verifies the user and
 * answers at once, as a passkey provider would after the user's touch. Returns its id.
 */
export async function addVirtualAuthenticator(cdp: CDPSession): Promise<string> {
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  return authenticatorId;
}
const CLIENT_ENTRY = path.resolve(import.meta.dirname, '..', '..', 'packages', 'client', 'src', 'index.ts');

/** @latchkey/client bundled for the browser, as an ES module (esbuild, from the sources). */
export async function bundleClient(options: { minify: boolean }): Promise<Uint8Array> {
  const result = await build({ entryPoints: [CLIENT_ENTRY], bundle: true, format: 'esm', target: 'es2022', minify: options.minify, write: false, logLevel: 'silent' });
  return result.outputFiles[0]!.contents;
}

/** One request to /auth/v0/* as the front door saw it. */
export interface AuthRequestSeen {
  path: string;
  /** The refresh cookie presented, if any. */
  refreshToken: string | undefined;
  /** ms since the epoch when it arrived and when its answer was finished. */
  start: number;
  end: number;
  /** 0 when the front door dropped it (outage). */
  status: number;
}

/**
 * How the front door treats requests to the auth service: forwards them (`up`), drops the
 * connection as if the service were unreachable (`down`), or answers 503 with `Retry-After`.
 */
export type AuthMode = { kind: 'up' } | { kind: 'down' } | { kind: 'unavailable'; retryAfterSeconds: number };

/**
 * The app's origin as a deployment would have it (docs/integration.md): one origin whose
 * `/auth/v0/*` goes to the Latchkey service, `/api/*` to the app's API (verifying tokens with
 * @latchkey/verify), `/app/` the page, which loads @latchkey/client. Served on `localhost`, which
 * Chromium treats as a secure context (Secure cookies, Web Locks).
 */
export interface FrontDoor {
  readonly ctx: TestContext;
  readonly origin: string;
  readonly auth: AuthRequestSeen[];
  /** Every request to /api/data: its method, and whether it carried an Authorization header. */
  readonly api: { method: string; authorization: boolean }[];
  mode: AuthMode;
  close(): Promise<void>;
}

/** The test page: the client on `window.client`, its events on `window.events`, and an app loop (`window.startApp`) that calls the API and refreshes on its own timers. */
const PAGE = `<!doctype html><meta charset="utf-8"><title>client test</title>
<script type="module">
import { createClient } from '/app/latchkey-client.js';
const client = createClient({ baseUrl: '' });
window.client = client;
window.createClient = createClient;
window.events = [];
/** Calls an operation of the client by its path ('me', 'mfa.verify'): { ok: body } or { error: the LatchkeyError's fields }. */
window.run = async (op, ...args) => {
  try {
    const [group, name] = op.includes('.') ? op.split('.') : [null, op];
    return { ok: (await (group === null ? client : client[group])[name](...args)) ?? null };
  } catch (e) {
    return { error: { name: e.name, code: e.code, message: e.message, status: e.status, retryAfter: e.retryAfter } };
  }
};
for (const name of ['signedIn', 'signedOut', 'tokenRefreshed']) client.on(name, (payload) => window.events.push({ name, ...payload }));
window.app = { ok: 0, failures: [], refreshes: 0, refreshFailures: [], stopped: false };
window.startApp = ({ apiEveryMs, refreshEveryMs, pauseWhenHidden }) => {
  const jitter = (ms) => ms * (0.75 + Math.random() / 2);
  const apiTick = async () => {
    if (window.app.stopped) return;
    if (client.signedIn && !(pauseWhenHidden && document.visibilityState === 'hidden')) {
      try {
        const res = await client.fetch('/api/data');
        if (res.status === 200) window.app.ok++;
        else window.app.failures.push({ status: res.status, body: await res.text(), at: Date.now() });
      } catch (err) {
        window.app.failures.push({ status: 0, code: err.code, at: Date.now() });
      }
    }
    setTimeout(apiTick, jitter(apiEveryMs));
  };
  const refreshTick = async () => {
    if (window.app.stopped) return;
    if (client.signedIn) {
      try {
        if (await client.refresh()) window.app.refreshes++;
        else window.app.refreshFailures.push({ signedOut: true, at: Date.now() });
      } catch (err) {
        window.app.refreshFailures.push({ code: err.code, at: Date.now() });
      }
    }
    setTimeout(refreshTick, jitter(refreshEveryMs));
  };
  setTimeout(apiTick, jitter(apiEveryMs));
  if (refreshEveryMs) setTimeout(refreshTick, jitter(refreshEveryMs));
};
window.setVisibility = (state) => {
  Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => state });
  Object.defineProperty(document, 'hidden', { configurable: true, get: () => state === 'hidden' });
  document.dispatchEvent(new Event('visibilitychange'));
};
</script>`;

/**
 * Starts the service (real clock, `env` settings) behind a front door on a loopback port. The
 * front door listens first: the service's WEBAUTHN_ORIGINS is its origin (unless `env` sets it),
 * the origin the browser puts in a passkey's client data. The page loads `options.clientJs` as
 * `/app/latchkey-client.js` (default: the client bundled from its sources, not minified). `options.port`:
 * the loopback port to listen on (default: a free one), for settings that must name the origin first.
 */
export async function startFrontDoor(env: Record<string, string>, options: { clientJs?: Uint8Array; port?: number } = {}): Promise<FrontDoor> {
  const server: Server = createServer((req, res) => handle(req, res));
  // Every request on its own connection: a dropped one is one attempt, never retried by the browser on a reused socket.
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const origin = `http://localhost:${(server.address() as AddressInfo).port}`;

  let ctx: TestContext;
  try {
    ctx = await createTestContext({ WEBAUTHN_ORIGINS: origin, ...env }, { clock: new WallClock() });
  } catch (err) {
    server.close();
    throw err;
  }
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const servicePort = (ctx.app.server.address() as AddressInfo).port;
  const clientJs = options.clientJs ?? (await bundleClient({ minify: false }));
  const verifier = createVerifier({
    jwksUrl: `http://127.0.0.1:${servicePort}/auth/v0/.well-known/jwks.json`,
    issuer: ctx.config.jwt.issuer,
    audience: ctx.config.jwt.audience,
  });
  const requireToken = latchkeyMiddleware(verifier);
  const auth: AuthRequestSeen[] = [];

  const forward = (req: IncomingMessage, res: ServerResponse, seen: AuthRequestSeen) => {
    const upstream = httpRequest({ host: '127.0.0.1', port: servicePort, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      seen.status = answer.statusCode ?? 0;
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
      answer.on('end', () => (seen.end = Date.now()));
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  };

  const door: FrontDoor = {
    ctx,
    origin,
    auth,
    api: [],
    mode: { kind: 'up' },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await ctx.close();
    },
  };

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    if (url.startsWith('/auth/v0/')) {
      const refreshToken = /(?:^|;\s*)refresh_token=([^;]*)/.exec(req.headers.cookie ?? '')?.[1];
      const seen: AuthRequestSeen = { path: url.split('?')[0]!, refreshToken, start: Date.now(), end: 0, status: 0 };
      auth.push(seen);
      const mode = door.mode;
      if (mode.kind === 'down') {
        seen.end = Date.now();
        req.socket.destroy();
      } else if (mode.kind === 'unavailable') {
        seen.status = 503;
        seen.end = Date.now();
        res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'retry-after': String(mode.retryAfterSeconds), connection: 'close' });
        res.end(JSON.stringify({ code: 'service_unavailable', message: 'The service is temporarily unavailable; try again shortly.' }));
      } else forward(req, res, seen);
    } else if (url === '/api/data') {
      door.api.push({ method: req.method ?? '', authorization: req.headers.authorization !== undefined });
      requireToken(req, res, () => {
        const caller = (req as IncomingMessage & { auth?: { userId: string; sessionId: string } }).auth!;
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
        res.end(JSON.stringify({ userId: caller.userId, sessionId: caller.sessionId }));
      });
    } else if (url.split('?')[0] === '/app/' || url === '/app/latchkey-client.js') {
      // The page with any query: a provider's flow returns to it with `?error=` on failure.
      const page = url.split('?')[0] === '/app/';
      res.writeHead(200, { 'content-type': page ? 'text/html; charset=utf-8' : 'text/javascript; charset=utf-8', 'cache-control': 'no-store' });
      res.end(page ? PAGE : clientJs);
    } else {
      res.writeHead(404).end();
    }
  }
  return door;
}

/** Milliseconds to wait. */
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
