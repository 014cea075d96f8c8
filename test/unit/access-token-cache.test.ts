/**
 * The cache of verified access tokens (src/modules/tokens/access-token.service.ts,
 * docs/performance.md): a token presented again skips the RS256 verification, but never what can
 * change since it was verified (`exp` and `nbf` against the clock, the verification key still
 * published), never holds a token that failed, and never holds more than its size.
 */
import { randomUUID, sign as rsaSign } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KeyStore, VerificationKey } from '../../src/modules/keys/keys.service.js';
import { CLOCK_TOLERANCE_SECONDS, createAccessTokenService, type AccessTokenService } from '../../src/modules/tokens/access-token.service.js';
import { temporaryKeyStore } from '../helpers/keys.js';

const ISSUER = 'https://auth.example.com';
const AUDIENCE = 'api.example.com';
const TTL_SECONDS = 900;
const START = 1_800_000_000;

let keys: KeyStore;

beforeAll(async () => {
  keys = await temporaryKeyStore('auth-at-cache-');
});

/** A verifier over `keyStore` whose clock reads `clock.seconds` (settable). */
function verifier(options: { cacheSize?: number; keyStore?: KeyStore } = {}): { service: AccessTokenService; clock: { seconds: number } } {
  const clock = { seconds: START };
  const service = createAccessTokenService({
    keys: options.keyStore ?? keys,
    issuer: ISSUER,
    audience: AUDIENCE,
    ttlSeconds: TTL_SECONDS,
    clock: { now: () => new Date(clock.seconds * 1000) },
    ...(options.cacheSize === undefined ? {} : { cacheSize: options.cacheSize }),
  });
  return { service, clock };
}

/** An access token with these claims, signed with the service's key (sign() sets no `nbf`). */
function signed(claims: Record<string, unknown>): string {
  const encode = (value: unknown): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
  const input = `${encode({ alg: 'RS256', typ: 'at+jwt', kid: keys.signing.kid })}.${encode(claims)}`;
  return `${input}.${rsaSign('sha256', Buffer.from(input, 'ascii'), keys.signing.privateKey).toString('base64url')}`;
}

const newToken = (service: AccessTokenService): Promise<string> => service.sign({ userId: randomUUID(), sessionId: randomUUID(), amr: ['pwd'] });

describe('the cache of verified access tokens', () => {
  it('answers a token presented again from the cache, with the claims of its verification', async () => {
    const { service } = verifier();
    const token = await newToken(service);
    const first = await service.verify(token);
    expect(first).toBeDefined();
    expect(service.cacheStats()).toEqual({ entries: 1, hits: 0, verifications: 1 });
    expect(await service.verify(token)).toEqual(first);
    expect(await service.verify(token)).toEqual(first);
    expect(service.cacheStats()).toEqual({ entries: 1, hits: 2, verifications: 1 });
  });

  it('refuses a cached token once it has expired (the leeway included), and drops it', async () => {
    const { service, clock } = verifier();
    const token = await newToken(service);
    expect(await service.verify(token)).toBeDefined();
    clock.seconds = START + TTL_SECONDS + CLOCK_TOLERANCE_SECONDS - 1;
    expect(await service.verify(token)).toBeDefined();
    clock.seconds = START + TTL_SECONDS + CLOCK_TOLERANCE_SECONDS;
    expect(await service.verify(token)).toBeUndefined();
    expect(service.cacheStats().entries).toBe(0);
    // Dropped, not kept as refused: with the clock set back it is verified in full again, and accepted.
    clock.seconds = START;
    expect(await service.verify(token)).toBeDefined();
    expect(service.cacheStats()).toEqual({ entries: 1, hits: 2, verifications: 2 });
  });

  it('refuses a cached token before its nbf (the leeway included) when the clock goes back, and drops it', async () => {
    const { service, clock } = verifier();
    const nbf = START + 60;
    const token = signed({ sub: randomUUID(), sid: randomUUID(), iss: ISSUER, aud: AUDIENCE, iat: nbf, nbf, exp: nbf + TTL_SECONDS, jti: randomUUID() });
    clock.seconds = nbf;
    expect(await service.verify(token)).toBeDefined();
    clock.seconds = nbf - CLOCK_TOLERANCE_SECONDS;
    expect(await service.verify(token)).toBeDefined();
    expect(service.cacheStats().hits).toBe(1);
    clock.seconds = nbf - CLOCK_TOLERANCE_SECONDS - 1;
    expect(await service.verify(token)).toBeUndefined();
    expect(service.cacheStats().entries).toBe(0);
  });

  it('verifies again, and refuses, a cached token whose verification key was retired meanwhile', async () => {
    const published = new Map<string, VerificationKey>(keys.verification);
    const keyStore: KeyStore = { ...keys, verification: published };
    const { service } = verifier({ keyStore });
    const token = await newToken(service);
    expect(await service.verify(token)).toBeDefined();
    published.delete(keys.signing.kid);
    expect(await service.verify(token)).toBeUndefined();
    expect(service.cacheStats()).toEqual({ entries: 0, hits: 0, verifications: 2 });
  });

  it('never holds a token that failed: a tampered copy of a cached token is verified in full and refused', async () => {
    const { service } = verifier();
    const token = await newToken(service);
    expect(await service.verify(token)).toBeDefined();
    const [h, p, s] = token.split('.') as [string, string, string];
    const flipped = `${h}.${p}.${s.slice(0, 10)}${s[10] === 'A' ? 'B' : 'A'}${s.slice(11)}`;
    for (const forged of [flipped, `${token}x`, `${h}.${p}.`, `${h}.${p}`]) {
      expect(await service.verify(forged)).toBeUndefined();
      expect(await service.verify(forged)).toBeUndefined();
    }
    expect(service.cacheStats()).toEqual({ entries: 1, hits: 0, verifications: 9 });
  });

  it('holds at most cacheSize tokens: the oldest makes room', async () => {
    const { service } = verifier({ cacheSize: 2 });
    const [a, b, c] = await Promise.all([newToken(service), newToken(service), newToken(service)]);
    for (const token of [a, b, c]) expect(await service.verify(token)).toBeDefined();
    expect(service.cacheStats()).toEqual({ entries: 2, hits: 0, verifications: 3 });
    // c and b are held; a was dropped and is verified again (and now b makes room for it).
    expect(await service.verify(c)).toBeDefined();
    expect(await service.verify(a)).toBeDefined();
    expect(service.cacheStats()).toEqual({ entries: 2, hits: 1, verifications: 4 });
    expect(await service.verify(c)).toBeDefined();
    expect(await service.verify(b)).toBeDefined();
    expect(service.cacheStats()).toEqual({ entries: 2, hits: 2, verifications: 5 });
  });

  it('with cacheSize 0, verifies every presentation in full and holds nothing', async () => {
    const { service } = verifier({ cacheSize: 0 });
    const token = await newToken(service);
    for (let i = 0; i < 3; i++) expect(await service.verify(token)).toBeDefined();
    expect(service.cacheStats()).toEqual({ entries: 0, hits: 0, verifications: 3 });
  });

  it('answers claims that cannot be changed through the cache', async () => {
    const { service } = verifier();
    const token = await newToken(service);
    const claims = await service.verify(token);
    expect(() => Object.assign(claims as object, { sub: randomUUID() })).toThrow(TypeError);
    expect(await service.verify(token)).toEqual(claims);
  });
});
