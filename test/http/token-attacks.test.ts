/**
 * Token attacks that test/http/access-token.test.ts does not already cover
 * (RFC 8725 §2 and §3; OWASP ASVS 5.0 V9.1): key-carrying headers (`jku`, `x5u`, `jwk`) that
 * must never be fetched or trusted, token confusion between the service's own credentials
 * (verification code, refresh token, access token), a wrong `typ`, and `crit` extensions.
 * Every attack answers 401 with exactly the catalog's {code, message}.
 */
import { createPublicKey, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { calculateJwkThumbprint, exportJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOG, type ErrorCode } from '../../src/errors.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, latestCode, postJson, refresh, signIn, signUp } from '../helpers/flows.js';

/** ACCESS_TOKEN_TTL_SECONDS default (README "Configuration"). */
const ACCESS_TTL = 900;
/** A loopback port nothing listens on: a fetch there would fail fast rather than hang. */
const CLOSED_PORT_URL = 'http://127.0.0.1:1/';
/** How long to wait for a stray fire-and-forget fetch before concluding that none happened. */
const STRAY_FETCH_WAIT_MS = 200;

let ctx: TestContext;
let alice: { id: string; username: string; password: string };
let aliceSessionId: string;
/** The attacker's own RSA key pair, its public JWK and that JWK's RFC 7638 thumbprint. */
let attackerKey: KeyObject;
let attackerJwk: JWK;
let attackerKid: string;
/** A web server the attacker controls, as the target of `jku` and `x5u`; it records every request. */
let attackerServer: Server;
let attackerOrigin: string;
const attackerServerRequests: IncomingMessage[] = [];

beforeAll(async () => {
  ctx = await createTestContext();
  alice = await createVerifiedUser(ctx);
  aliceSessionId = (await signIn(ctx, { username: alice.username, password: alice.password })).sessionId;

  attackerKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  attackerJwk = await exportJWK(createPublicKey(attackerKey));
  attackerKid = await calculateJwkThumbprint(attackerJwk, 'sha256');

  attackerServer = createServer((req, res) => {
    attackerServerRequests.push(req);
    const body = JSON.stringify({ keys: [{ ...attackerJwk, kid: attackerKid, use: 'sig', alg: 'RS256' }] });
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => attackerServer.listen(0, '127.0.0.1', resolve));
  attackerOrigin = `http://127.0.0.1:${(attackerServer.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => attackerServer?.close(() => resolve()));
  await ctx?.close();
});

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/** Claims the service would issue for alice's session at the test clock's now. */
function claims(): Record<string, unknown> {
  const iat = Math.floor(ctx.clock.now().getTime() / 1000);
  return {
    iss: ctx.config.jwt.issuer,
    aud: ctx.config.jwt.audience,
    sub: alice.id,
    sid: aliceSessionId,
    iat,
    exp: iat + ACCESS_TTL,
    jti: randomUUID(),
  };
}

/**
 * Builds an RS256 JWS by hand with exactly the given protected header (jose's signer would
 * refuse some of the headers below), signed by `key` (default: the service's signing key).
 */
function signRaw(header: Record<string, unknown>, payload: Record<string, unknown> = claims(), key: KeyObject = ctx.app.keys.signing.privateKey): string {
  const signingInput = `${b64url(header)}.${b64url(payload)}`;
  return `${signingInput}.${sign('sha256', Buffer.from(signingInput), key).toString('base64url')}`;
}

/** The header the service itself puts on access tokens. */
function serviceHeader(): Record<string, unknown> {
  return { alg: 'RS256', typ: 'at+jwt', kid: ctx.app.keys.signing.kid };
}

function me(token: string): Promise<LightMyRequestResponse> {
  return ctx.app.inject({ method: 'GET', url: '/auth/v0/me', headers: { authorization: `Bearer ${token}` } });
}

/** Asserts the catalog status and exactly the catalog's {code, message} body. */
function expectError(res: LightMyRequestResponse, code: ErrorCode): void {
  expect(res.statusCode, res.body).toBe(ERROR_CATALOG[code].status);
  expect(res.json()).toEqual({ code, message: ERROR_CATALOG[code].message });
}

describe('token attacks (RFC 8725)', () => {
  it('control: a hand-built token with the service header, key and claims is accepted', async () => {
    const res = await me(signRaw(serviceHeader()));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ session_id: aliceSessionId, user: { id: alice.id } });
  });

  describe('key-carrying headers are never fetched nor trusted (RFC 8725 §3.10, RFC 7515 §4.1.2-4.1.5)', () => {
    const cases: [string, () => Record<string, unknown>][] = [
      ['jku to the attacker JWKS, attacker kid', () => ({ alg: 'RS256', typ: 'at+jwt', kid: attackerKid, jku: `${attackerOrigin}/jwks.json` })],
      ['jku to the attacker JWKS, the service kid', () => ({ ...serviceHeader(), jku: `${attackerOrigin}/jwks.json` })],
      ['jku to the attacker JWKS, no kid', () => ({ alg: 'RS256', typ: 'at+jwt', jku: `${attackerOrigin}/jwks.json` })],
      ['jku to a closed loopback port', () => ({ alg: 'RS256', typ: 'at+jwt', kid: attackerKid, jku: CLOSED_PORT_URL })],
      ['x5u to the attacker server, attacker kid', () => ({ alg: 'RS256', typ: 'at+jwt', kid: attackerKid, x5u: `${attackerOrigin}/cert.pem` })],
      ['x5u to the attacker server, the service kid', () => ({ ...serviceHeader(), x5u: `${attackerOrigin}/cert.pem` })],
      ['x5u to a closed loopback port', () => ({ alg: 'RS256', typ: 'at+jwt', x5u: CLOSED_PORT_URL })],
      ['jwk embedding the attacker public key, no kid', () => ({ alg: 'RS256', typ: 'at+jwt', jwk: attackerJwk })],
      ['jwk embedding the attacker public key, its own kid', () => ({ alg: 'RS256', typ: 'at+jwt', kid: attackerKid, jwk: { ...attackerJwk, kid: attackerKid } })],
      ['jwk embedding the attacker public key, the service kid', () => ({ ...serviceHeader(), jwk: attackerJwk })],
    ];

    it.each(cases)('%s, signed by the attacker key: 401 auth.invalid_access_token', async (_what, header) => {
      expectError(await me(signRaw(header(), claims(), attackerKey)), 'auth.invalid_access_token');
    });

    it('the jku/x5u target received no request at all', async () => {
      // Every case above ran first (same file, sequential). Allow a stray background fetch to land.
      await new Promise((resolve) => setTimeout(resolve, STRAY_FETCH_WAIT_MS));
      expect(attackerServerRequests.map((r) => r.url)).toEqual([]);
      // The target itself works: had the service fetched it, the request would have been recorded.
      const probe = await fetch(`${attackerOrigin}/jwks.json`);
      expect(probe.status).toBe(200);
      expect(attackerServerRequests).toHaveLength(1);
    });
  });

  describe('one credential presented as another', () => {
    it('a verification code as Bearer: 401 auth.invalid_access_token, and the code is left untouched', async () => {
      const { body } = await signUp(ctx);
      const email = body.user.email!;
      const code = await latestCode(ctx, email);
      expectError(await me(code), 'auth.invalid_access_token');
      expectError(
        await ctx.app.inject({ method: 'GET', url: '/auth/v0/sessions', headers: { authorization: `Bearer ${code}` } }),
        'auth.invalid_access_token',
      );
      // The failed Bearer attempts did not count against the code.
      const verify = await postJson(ctx, '/auth/v0/verify-email', { email, code });
      expect(verify.statusCode, verify.body).toBe(204);
    });

    it('a refresh token as Bearer: 401 auth.invalid_access_token, and the refresh token still refreshes', async () => {
      const s = await signIn(ctx, { username: alice.username, password: alice.password });
      expectError(await me(s.refreshToken), 'auth.invalid_access_token');
      const res = await refresh(ctx, s.refreshToken);
      expect(res.statusCode, res.body).toBe(200);
    });

    it('an access token as the refresh cookie: 401 auth.invalid_refresh_token, and nothing is revoked', async () => {
      const s = await signIn(ctx, { username: alice.username, password: alice.password });
      expectError(await refresh(ctx, s.accessToken), 'auth.invalid_refresh_token');
      // Also a hand-made token that is valid as an access token.
      expectError(await refresh(ctx, signRaw(serviceHeader(), { ...claims(), sid: s.sessionId })), 'auth.invalid_refresh_token');
      // The session is intact: its access token and its real refresh token still work.
      expect((await me(s.accessToken)).statusCode).toBe(200);
      expect((await refresh(ctx, s.refreshToken)).statusCode).toBe(200);
    });
  });

  describe('header checks on tokens signed by the service key with right claims', () => {
    it.each([
      ['typ JWT', 'JWT'],
      ['typ application/jwt', 'application/jwt'],
      ['typ of another JWT profile (dpop+jwt)', 'dpop+jwt'],
    ])('an access token with %s: 401 auth.invalid_access_token (RFC 9068 §2.1, RFC 8725 §3.11)', async (_what, typ) => {
      expectError(await me(signRaw({ ...serviceHeader(), typ })), 'auth.invalid_access_token');
    });

    it.each<[string, Record<string, unknown>]>([
      ['an unknown extension, present in the header', { crit: ['x-acme-binding'], 'x-acme-binding': 'device-1' }],
      ['an unknown extension, absent from the header', { crit: ['x-acme-binding'] }],
      ['a registered parameter (exp), which crit must not name', { crit: ['exp'], exp: 1 }],
      ['an empty list', { crit: [] }],
      ['a string instead of a list', { crit: 'x-acme-binding', 'x-acme-binding': true }],
    ])('an RS256 token whose crit header names %s: 401 auth.invalid_access_token (RFC 7515 §4.1.11)', async (_what, extra) => {
      expectError(await me(signRaw({ ...serviceHeader(), ...extra })), 'auth.invalid_access_token');
    });
  });
});

describe('one spelling per token', () => {
  /** The base64url alphabet (RFC 4648 §5), in index order. */
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

  it('an access token whose signature segment is re-spelled (same bytes, unused low bits set) is 401', async () => {
    const s = await signIn(ctx, { username: alice.username, password: alice.password });
    const me = (token: string) => ctx.app.inject({ method: 'GET', url: '/auth/v0/me', headers: { authorization: `Bearer ${token}` } });
    expect((await me(s.accessToken)).statusCode).toBe(200);
    // A 256-byte RSA signature is 342 characters: the last one carries 2 bits and 4 unused ones.
    const last = ALPHABET.indexOf(s.accessToken.at(-1)!);
    const respelled = s.accessToken.slice(0, -1) + ALPHABET[(last & ~15) | 1]!;
    expect(Buffer.from(respelled.split('.')[2]!, 'base64url').equals(Buffer.from(s.accessToken.split('.')[2]!, 'base64url'))).toBe(true);
    const res = await me(respelled);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ code: 'auth.invalid_access_token', message: ERROR_CATALOG['auth.invalid_access_token'].message });
  });
});
