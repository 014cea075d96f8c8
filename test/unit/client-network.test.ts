import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clientNetwork } from '../../src/modules/rate-limits/client-network.js';

describe('clientNetwork: the client a per-IP limit counts', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::FFFF:cb00:7107', '203.0.113.7'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:0:0:0:1', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::', '0:0:0:0::/64'],
    ['not an address', 'not an address'],
  ])('%s counts as %s', (ip, network) => {
    expect(clientNetwork(ip)).toBe(network);
  });

  it('an unknown client is one client', () => {
    expect(clientNetwork(null)).toBe('unknown');
  });

  it('every IPv6 address of a /64 maps to one network, and distinct /64s to distinct ones', () => {
    const group = fc.integer({ min: 0, max: 0xffff }).map((g) => g.toString(16));
    const groups = (n: number) => fc.array(group, { minLength: n, maxLength: n });
    fc.assert(
      fc.property(groups(4), groups(4), groups(4), (prefix, a, b) => {
        expect(clientNetwork([...prefix, ...a].join(':'))).toBe(clientNetwork([...prefix, ...b].join(':')));
        const other = [...prefix];
        other[3] = ((Number.parseInt(prefix[3]!, 16) + 1) & 0xffff).toString(16);
        expect(clientNetwork([...other, ...a].join(':'))).not.toBe(clientNetwork([...prefix, ...a].join(':')));
      }),
    );
  });
});
