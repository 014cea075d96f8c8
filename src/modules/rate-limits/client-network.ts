import { isIPv4, isIPv6 } from 'node:net';

/** The one client every request without a known address counts as. */
export const UNKNOWN_CLIENT = 'unknown';

/**
 * The client a per-IP rate limit counts, named by the network a single client controls rather
 * than by its exact address (docs/security.md, rate limits):
 * - IPv4: the address itself (`203.0.113.7`).
 * - IPv4-mapped IPv6 (`::ffff:203.0.113.7`, RFC 4291 §2.5.5.2, what a dual-stack listener sees
 *   for an IPv4 client): the IPv4 address, so one client is one count whichever way it arrives.
 * - Any other IPv6 address: its /64 prefix (`2001:db8:1:2::/64`). One host or home router is
 *   routinely given a whole /64 (RFC 7421, RFC 8981 temporary addresses), so counting exact
 *   addresses would give one client 2^64 fresh counts.
 * - Anything else (no address known, or text that is no IP address): itself, unchanged.
 *
 * @param ip the request's client address as Fastify reports it (`request.ip`), or null.
 * @returns a stable text naming the client's network; the rate limiter stores only its HMAC.
 */
export function clientNetwork(ip: string | null): string {
  if (ip === null) return UNKNOWN_CLIENT;
  if (isIPv4(ip)) return ip;
  // A zone index (`fe80::1%eth0`) names an interface of this host, not part of the address.
  const address = ip.split('%', 1)[0]!;
  if (!isIPv6(address)) return ip;
  const groups = ipv6Groups(address);
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === IPV4_MAPPED_MARK;
  if (mapped) return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  return `${groups.slice(0, IPV6_PREFIX_GROUPS).map((g) => g.toString(16)).join(':')}::/64`;
}

/** The sixth group of an IPv4-mapped IPv6 address `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2), after five zero groups. */
const IPV4_MAPPED_MARK = 0xffff;
/** Groups of 16 bits in a /64 prefix. */
const IPV6_PREFIX_GROUPS = 4;
/** Groups of 16 bits in an IPv6 address. */
const IPV6_GROUPS = 8;

/**
 * The eight 16-bit groups of a valid IPv6 address (as `net.isIPv6` accepts it), with `::`
 * expanded and a trailing dotted IPv4 part (`::ffff:1.2.3.4`) turned into two groups.
 */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, undefined];
  const parse = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(IPV6_GROUPS - left.length - right.length).fill(0), ...right];
}
