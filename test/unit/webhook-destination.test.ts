import { describe, expect, it } from 'vitest';
import { addressKind, addressRefusal, endpointUrlProblem, normalizeEndpointUrl } from '../../src/modules/webhooks/destination.js';
import { nextAttemptAt, retryAfterSeconds, RETRY_SCHEDULE_SECONDS } from '../../src/modules/webhooks/delivery.worker.js';

/** Where webhooks may go (docs/api.md#webhook-destinations) and when they are retried (docs/api.md#retries). */
describe('webhook destinations', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['0.0.0.0', 'loopback'],
    ['::1', 'loopback'],
    ['::', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['::ffff:10.0.0.1', 'private'],
    ['169.254.169.254', 'link_local'],
    ['fe80::1', 'link_local'],
    ['febf::1', 'link_local'],
    ['::ffff:169.254.169.254', 'link_local'],
    ['224.0.0.1', 'not_unicast'],
    ['255.255.255.255', 'not_unicast'],
    ['ff02::1', 'not_unicast'],
    ['not an address', 'not_unicast'],
    ['172.32.0.1', 'public'],
    ['8.8.8.8', 'public'],
    ['2001:db8::1', 'public'],
    ['fec0::1', 'public'],
  ])('%s is %s', (address, kind) => {
    expect(addressKind(address)).toBe(kind);
  });

  it('refuses loopback and private addresses unless allowed, link-local and non-unicast ones always', () => {
    const strict = { allowPrivateNetworks: false };
    const open = { allowPrivateNetworks: true };
    expect(addressRefusal('8.8.8.8', strict)).toBeUndefined();
    expect(addressRefusal('127.0.0.1', strict)).toBe('refused destination: 127.0.0.1 is a loopback address (WEBHOOK_ALLOW_PRIVATE_NETWORKS is false)');
    expect(addressRefusal('10.0.0.1', strict)).toBe('refused destination: 10.0.0.1 is a private address (WEBHOOK_ALLOW_PRIVATE_NETWORKS is false)');
    expect(addressRefusal('127.0.0.1', open)).toBeUndefined();
    expect(addressRefusal('fd00::1', open)).toBeUndefined();
    expect(addressRefusal('169.254.169.254', open)).toBe('refused destination: 169.254.169.254 is a link-local address');
    expect(addressRefusal('fe80::1', open)).toBe('refused destination: fe80::1 is a link-local address');
    expect(addressRefusal('224.0.0.1', open)).toBe('refused destination: 224.0.0.1 is not a unicast address');
  });

  it('endpoint URLs: https, or http to a loopback host; normalised', () => {
    for (const ok of ['https://hooks.example.com/a', 'https://10.0.0.1/a', 'http://localhost/a', 'http://127.0.0.1:8080/a', 'http://127.1/a', 'http://[::1]/a']) expect(endpointUrlProblem(ok), ok).toBeUndefined();
    for (const bad of ['http://hooks.example.com/a', 'http://10.0.0.1/a', 'http://0.0.0.0/a', 'http://[::ffff:127.0.0.1]/a', 'ws://localhost/a', 'https://', 'https://u@hooks.example.com/', 'https://hooks.example.com/#x', 'localhost/a']) {
      expect(endpointUrlProblem(bad), bad).toBeDefined();
    }
    expect(normalizeEndpointUrl('HTTPS://Hooks.Example.COM:443/In?x=1')).toBe('https://hooks.example.com/In?x=1');
    expect(normalizeEndpointUrl('http://127.1/a')).toBe('http://127.0.0.1/a');
  });
});

describe('retries', () => {
  const end = new Date('2026-05-01T12:00:00Z');
  it('follow 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then none (dead)', () => {
    expect(RETRY_SCHEDULE_SECONDS).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    for (const [i, delay] of RETRY_SCHEDULE_SECONDS.entries()) expect(nextAttemptAt(i + 1, end, undefined)).toEqual(new Date(end.getTime() + delay * 1000));
    expect(nextAttemptAt(8, end, undefined)).toBeNull();
    expect(nextAttemptAt(8, end, 60)).toBeNull();
  });
  it('take a longer Retry-After (delay seconds or an HTTP date, at most a day), never a shorter one', () => {
    expect(nextAttemptAt(1, end, 120)).toEqual(new Date(end.getTime() + 120_000));
    expect(nextAttemptAt(2, end, 120)).toEqual(new Date(end.getTime() + 300_000));
    expect(retryAfterSeconds('120', end)).toBe(120);
    expect(retryAfterSeconds(' 7 ', end)).toBe(7);
    expect(retryAfterSeconds(new Date(end.getTime() + 90_500).toUTCString(), end)).toBe(90);
    expect(retryAfterSeconds(new Date(end.getTime() - 5_000).toUTCString(), end)).toBe(0);
    expect(retryAfterSeconds('9999999', end)).toBe(86_400);
    expect(retryAfterSeconds('soon', end)).toBeUndefined();
    expect(retryAfterSeconds('-5', end)).toBeUndefined();
    expect(retryAfterSeconds(undefined, end)).toBeUndefined();
  });
});
