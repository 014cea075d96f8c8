import { BlockList, isIP } from 'node:net';

/**
 * Where webhooks may go (docs/security.md, "Webhooks"; OWASP API Security Top 10 2023, API7:
 * Server Side Request Forgery). Two checks: an endpoint's URL when it is added or changed
 * ({@link endpointUrlProblem}), and every address its host resolves to, at each attempt, before
 * a connection is made ({@link addressRefusal}, applied by webhook-sender.ts to the addresses it
 * then connects to, so a second resolution cannot swap in another one).
 */

/** Longest endpoint URL accepted, in characters. */
export const MAX_ENDPOINT_URL_LENGTH = 2048;

/** What an address is, for the delivery rules. */
export type AddressKind = 'public' | 'loopback' | 'private' | 'link_local' | 'not_unicast';

function subnets(list: readonly (readonly [string, number, 'ipv4' | 'ipv6'])[]): BlockList {
  const block = new BlockList();
  for (const [network, prefix, family] of list) block.addSubnet(network, prefix, family);
  return block;
}

/**
 * The host itself: 127.0.0.0/8 and ::1 (RFC 1122 §3.2.1.3, RFC 4291 §2.5.3), and the
 * unspecified addresses 0.0.0.0/8 and ::, which a connection on Linux reaches the host through.
 * BlockList matches IPv4-mapped IPv6 addresses (::ffff:127.0.0.1) against the IPv4 subnets.
 */
const LOOPBACK = subnets([
  ['127.0.0.0', 8, 'ipv4'],
  ['0.0.0.0', 8, 'ipv4'],
  ['::1', 128, 'ipv6'],
  ['::', 128, 'ipv6'],
]);
/** Private networks: RFC 1918, unique local IPv6 (RFC 4193, fc00::/7), and shared address space (RFC 6598, 100.64.0.0/10), never routed on the internet. */
const PRIVATE = subnets([
  ['10.0.0.0', 8, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['fc00::', 7, 'ipv6'],
]);
/** Link-local: 169.254.0.0/16 (RFC 3927, where cloud metadata services answer) and fe80::/10 (RFC 4291). */
const LINK_LOCAL = subnets([
  ['169.254.0.0', 16, 'ipv4'],
  ['fe80::', 10, 'ipv6'],
]);
/** Not one host: multicast (224.0.0.0/4, ff00::/8) and the reserved 240.0.0.0/4 with the broadcast address. */
const NOT_UNICAST = subnets([
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['ff00::', 8, 'ipv6'],
]);

/** The kind of an IP address (IPv4 or IPv6 text); an unparseable one is `not_unicast`. */
export function addressKind(address: string): AddressKind {
  const family = isIP(address);
  if (family === 0) return 'not_unicast';
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (LOOPBACK.check(address, type)) return 'loopback';
  if (LINK_LOCAL.check(address, type)) return 'link_local';
  if (PRIVATE.check(address, type)) return 'private';
  if (NOT_UNICAST.check(address, type)) return 'not_unicast';
  return 'public';
}

/**
 * Why a delivery must not connect to `address`, or undefined when it may: loopback and private
 * addresses are refused unless `allowPrivateNetworks` (WEBHOOK_ALLOW_PRIVATE_NETWORKS);
 * link-local ones and addresses that are not one host always (docs/api.md#events-and-webhooks).
 * The text names the address and the rule, nothing else (it is stored as the delivery's `last_error`).
 */
export function addressRefusal(address: string, options: { allowPrivateNetworks: boolean }): string | undefined {
  const kind = addressKind(address);
  switch (kind) {
    case 'public':
      return undefined;
    case 'loopback':
    case 'private':
      return options.allowPrivateNetworks ? undefined : `refused destination: ${address} is a ${kind} address (WEBHOOK_ALLOW_PRIVATE_NETWORKS is false)`;
    case 'link_local':
      return `refused destination: ${address} is a link-local address`;
    case 'not_unicast':
      return `refused destination: ${address} is not a unicast address`;
  }
}

/** A URL's host without the brackets of an IPv6 literal. */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** Whether `host` (without brackets) is a loopback host as the URL rule means it: `localhost`, or a literal 127.0.0.0/8 or ::1 address. */
function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const family = isIP(host);
  if (family === 4) return LOOPBACK.check(host, 'ipv4') && host.startsWith('127.');
  return family === 6 && host === '::1';
}

/**
 * Why `raw` cannot be a webhook endpoint's URL, or undefined when it can
 * (docs/api.md#events-and-webhooks): an absolute `https://` URL, or `http://` for a loopback host
 * only (`localhost`, a literal 127.0.0.0/8 or ::1 address), with a host, without credentials
 * (they would be shown with the URL) or a fragment, at most {@link MAX_ENDPOINT_URL_LENGTH}
 * characters. Where the host resolves is checked at each attempt, not here.
 */
export function endpointUrlProblem(raw: string): string | undefined {
  if (raw.length > MAX_ENDPOINT_URL_LENGTH) return `url must be at most ${MAX_ENDPOINT_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url must be an absolute https:// URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'url must be an absolute https:// URL';
  if (url.hostname === '') return 'url must name a host';
  if (url.protocol === 'http:' && !isLoopbackHost(hostOf(url))) return 'url must use https:// (http:// only for localhost, 127.0.0.0/8 or [::1])';
  if (url.username !== '' || url.password !== '') return 'url must not carry a user name or password';
  if (raw.includes('#')) return 'url must not have a fragment';
  return undefined;
}

/** The stored form of an endpoint URL that passed {@link endpointUrlProblem}: as the WHATWG URL parser serialises it. */
export function normalizeEndpointUrl(raw: string): string {
  return new URL(raw).href;
}
