import { promises as dns, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import { addressRefusal, hostOf } from './destination.js';

/**
 * How a webhook attempt goes over HTTP (docs/api.md#events-and-webhooks): one POST with undici, no
 * redirect followed (a 3xx is an answer like any other non-2xx), at most `timeoutMs` for the
 * connection, the answer's headers and its body together. Every address the host resolves to is
 * checked before a connection is made ({@link addressRefusal}); the connection then goes to one of
 * exactly those addresses: undici's connector hands its `lookup` option to `net.connect`/
 * `tls.connect`, which connect to what that lookup returned, so no second resolution (DNS
 * rebinding) can swap in an address that was not checked. A host written as an address is
 * checked as it is (no lookup happens for it).
 */

/** Resolves a host name to all its addresses (`dns.lookup` with `all`; tests give their own). */
export type Resolver = (hostname: string) => Promise<readonly LookupAddress[]>;

/** The system resolver: `dns.lookup` (the hosts file, then DNS), every address in the resolver's order. */
export const systemResolver: Resolver = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

/** The outcome of one attempt: the receiver's answer, or why there was none. */
export type AttemptOutcome =
  | { readonly answered: true; readonly status: number; readonly retryAfter: string | undefined }
  | { readonly answered: false; readonly error: string };

/** Sends webhook requests. */
export interface WebhookSender {
  /** POSTs `body` with `headers` to `url`; never throws: a failure is an outcome without an answer. */
  post(url: string, headers: Readonly<Record<string, string>>, body: string): Promise<AttemptOutcome>;
  /**
   * Closes every connection, aborting the requests still in flight (a stopping worker does not
   * wait for a slow receiver: those attempts are not recorded, and are made again).
   */
  close(): Promise<void>;
}

/** Most bytes of an answer's body read (and thrown away) so its connection can be reused; a longer body closes it instead. */
const MAX_DISCARDED_BODY_BYTES = 64 * 1024;
/** The `User-Agent` of every attempt. */
export const WEBHOOK_USER_AGENT = 'Latchkey-Webhooks/1';

/** Marks the error of a refused destination, so the attempt's `last_error` is its reason. */
class RefusedDestination extends Error {
  override readonly name = 'RefusedDestination';
}

/**
 * A `lookup` for `net.connect` that resolves with `resolve`, refuses the name when any of its
 * addresses is refused, and otherwise returns those same addresses (of the family asked for).
 */
function checkedLookup(resolve: Resolver, allowPrivateNetworks: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const checked = (async (): Promise<LookupAddress[]> => {
      const all = await resolve(hostname);
      for (const { address } of all) {
        const refusal = addressRefusal(address, { allowPrivateNetworks });
        if (refusal !== undefined) throw new RefusedDestination(`${refusal} (${hostname})`);
      }
      const wanted = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : [...all];
      if (wanted.length === 0) throw Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' });
      return wanted;
    })();
    checked.then(
      (addresses) => {
        if (options.all === true) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };
}

/** undici's codes of a time limit reached while connecting or waiting for the answer. */
const TIMEOUT_CODES: ReadonlySet<string> = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** Why an attempt got no answer, from `err` and its causes: a refusal's text, or the deepest error code. */
function failureOf(err: unknown): { refusal: string } | { code: string } {
  let code = err instanceof Error ? err.name : 'unknown';
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof RefusedDestination) return { refusal: e.message };
    const c = (e as NodeJS.ErrnoException).code;
    if (typeof c === 'string') code = c;
  }
  return { code };
}

/**
 * Creates the sender of one worker.
 * @param options.allowPrivateNetworks WEBHOOK_ALLOW_PRIVATE_NETWORKS.
 * @param options.timeoutMs the attempt's time limit (10 s in production).
 * @param options.resolve the resolver (default {@link systemResolver}).
 */
export function createWebhookSender(options: { allowPrivateNetworks: boolean; timeoutMs: number; resolve?: Resolver }): WebhookSender {
  const { allowPrivateNetworks, timeoutMs } = options;
  const agent = new Agent({ connect: { lookup: checkedLookup(options.resolve ?? systemResolver, allowPrivateNetworks), timeout: timeoutMs } });
  const timeoutText = `timeout: no answer within ${timeoutMs / 1000} s`;
  return {
    async post(url, headers, body) {
      let target: URL;
      try {
        target = new URL(url);
      } catch {
        return { answered: false, error: 'the endpoint URL does not parse' };
      }
      const host = hostOf(target);
      if (isIP(host) !== 0) {
        const refusal = addressRefusal(host, { allowPrivateNetworks });
        if (refusal !== undefined) return { answered: false, error: refusal };
      }
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const res = await request(target, { method: 'POST', headers, body, dispatcher: agent, signal, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, maxRedirections: 0 });
        const retryAfter = res.headers['retry-after'];
        // The answer counts once its status is in; its body is only drained.
        await res.body.dump({ limit: MAX_DISCARDED_BODY_BYTES }).catch(() => undefined);
        return { answered: true, status: res.statusCode, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter };
      } catch (err) {
        if (signal.aborted) return { answered: false, error: timeoutText };
        const failure = failureOf(err);
        if ('refusal' in failure) return { answered: false, error: failure.refusal };
        if (TIMEOUT_CODES.has(failure.code)) return { answered: false, error: timeoutText };
        if (failure.code === 'ENOTFOUND' || failure.code === 'EAI_AGAIN') return { answered: false, error: `DNS lookup failed (${failure.code})` };
        return { answered: false, error: `connection error (${failure.code})` };
      }
    },
    close: () => agent.destroy(),
  };
}
