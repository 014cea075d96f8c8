import { createHmac, createPublicKey, generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { SignJWT, type JSONWebKeySet, type JWTHeaderParameters, type JWTPayload } from 'jose';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, keysOf, signIn, withBearer } from '../helpers/flows.js';

/** ACCESS_TOKEN_TTL_SECONDS default (README "Configuration"). */
const ACCESS_TTL = 900;
/**
 * docs/api.md#access-token allows "at most a few seconds" of leeway on `exp`/`nbf`; a token this many
 * seconds past its expiry (or this far in its future) must be refused under any such leeway.
 */
const BEYOND_LEEWAY = 10;
const SESSION_TTL = 2_592_000;

let ctx: TestContext;
let alice: { id: string; username: string; password: string };
let bob: { id: string; username: string; password: string };
/** A live session of alice and one of bob. */
let aliceSessionId: string;
let bobSessionId: string;
/** The body every invalid_access_token answer must have (no reason is revealed). */
let invalidBody: { code: string; message: string };

beforeAll(async () => {
  ctx = await createTestContext();
  alice = await createVerifiedUser(ctx);
  bob = await createVerifiedUser(ctx);
  aliceSessionId = (await signIn(ctx, { username: alice.username, password: alice.password })).sessionId;
  bobSessionId = (await signIn(ctx, { username: bob.username, password: bob.password })).sessionId;
  const reference = await me('Bearer not.a.jwt');
  expect(reference.statusCode).toBe(401);
  invalidBody = reference.json();
  expect(keysOf(invalidBody)).toEqual(['code', 'message']);
  expect(invalidBody.code).toBe('auth.invalid_access_token');
});
afterAll(async () => ctx.close());

/** GET /auth/v0/me with the given Authorization header value (or none). */
function me(authorization: string | undefined): Promise<LightMyRequestResponse> {
  return ctx.app.inject({ method: 'GET', url: '/auth/v0/me', headers: authorization === undefined ? {} : { authorization } });
}

/** Asserts 401 with exactly {code, message}; for invalid_access_token, the one shared body. */
function expect401(res: LightMyRequestResponse, code = 'auth.invalid_access_token'): void {
  expect(res.statusCode, res.body).toBe(401);
  const body = res.json();
  expect(keysOf(body)).toEqual(['code', 'message']);
  expect(body).toEqual({ code, message: expect.any(String) });
  if (code === 'auth.invalid_access_token') expect(body).toEqual(invalidBody);
}

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

function nowSeconds(): number {
  return Math.floor(ctx.clock.now().getTime() / 1000);
}

/** Claims the service would issue for alice's session, at the test clock's now; overridable. */
function claims(overrides: Record<string, unknown> = {}): JWTPayload {
  const iat = nowSeconds();
  const base: Record<string, unknown> = {
    iss: ctx.config.jwt.issuer,
    aud: ctx.config.jwt.audience,
    sub: alice.id,
    sid: aliceSessionId,
    iat,
    exp: iat + ACCESS_TTL,
    jti: randomUUID(),
    ...overrides,
  };
  for (const k of Object.keys(base)) if (base[k] === undefined) delete base[k];
  return base as JWTPayload;
}

/** Signs `payload` as RS256 with `key` (default: the service's own signing key) under the header given. */
function signRs256(payload: JWTPayload, header: Partial<JWTHeaderParameters> = {}, key: KeyObject = ctx.app.keys.signing.privateKey): Promise<string> {
  return new SignJWT(payload).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: ctx.app.keys.signing.kid, ...header }).sign(key);
}

/** Builds an HS256 token by hand (jose refuses asymmetric-key bytes as an HMAC secret). */
function signHs256(payload: JWTPayload, secret: Buffer | string): string {
  const signingInput = `${b64url({ alg: 'HS256', typ: 'at+jwt', kid: ctx.app.keys.signing.kid })}.${b64url(payload)}`;
  return `${signingInput}.${createHmac('sha256', secret).update(signingInput).digest('base64url')}`;
}

async function jwks(): Promise<JSONWebKeySet> {
  const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json' });
  return res.json() as JSONWebKeySet;
}

describe('GET /auth/v0/me: Bearer access token checks', () => {
  it('control: a token from sign-in and a hand-signed token with the right claims both work', async () => {
    const s = await signIn(ctx, { username: alice.username, password: alice.password });
    const res = await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ session_id: s.sessionId, user: { id: alice.id } });

    // The helpers below produce acceptable tokens, so each rejection is caused by its one change.
    const forged = await signRs256(claims());
    const ok = await me(`Bearer ${forged}`);
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ session_id: aliceSessionId, user: { id: alice.id } });
  });

  it('no Authorization header: 401 auth.missing_access_token', async () => {
    expect401(await me(undefined), 'auth.missing_access_token');
  });

  it.each([
    ['a Basic scheme', 'Basic xyz'],
    ['"Bearer" with nothing', 'Bearer'],
    ['"Bearer " with only a space', 'Bearer '],
    ['a bare token without scheme', 'eyJhbGciOiJSUzI1NiJ9.e30.sig'],
    ['garbage after Bearer', 'Bearer @@@###'],
  ])('%s: 401 auth.invalid_access_token', async (_what, header) => {
    expect401(await me(header));
  });

  it('alg none (unsecured JWT) with otherwise right claims and kid', async () => {
    const token = `${b64url({ alg: 'none', typ: 'at+jwt', kid: ctx.app.keys.signing.kid })}.${b64url(claims())}.`;
    expect401(await me(`Bearer ${token}`));
    const upper = `${b64url({ alg: 'None', typ: 'at+jwt', kid: ctx.app.keys.signing.kid })}.${b64url(claims())}.`;
    expect401(await me(`Bearer ${upper}`));
  });

  it('HS256 signed with the public key bytes as the HMAC secret (PEM and JWK n), real kid', async () => {
    const publicKey = createPublicKey(ctx.app.keys.signing.privateKey);
    const spkiPem = publicKey.export({ type: 'spki', format: 'pem' }) as string;
    const pkcs1Pem = publicKey.export({ type: 'pkcs1', format: 'pem' }) as string;
    const key = (await jwks()).keys.find((k) => k.kid === ctx.app.keys.signing.kid);
    expect(key?.n).toBeDefined();
    const n = key!.n!;
    for (const secret of [spkiPem, pkcs1Pem, n, Buffer.from(n, 'base64url')]) {
      expect401(await me(`Bearer ${signHs256(claims(), secret)}`));
    }
  });

  it('RS256 signed by another RSA key, under the known kid and under an unknown kid', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    expect401(await me(`Bearer ${await signRs256(claims(), {}, privateKey)}`));
    expect401(await me(`Bearer ${await signRs256(claims(), { kid: 'attacker-key' }, privateKey)}`));
  });

  it.each([
    ['an unknown kid', 'unknown-kid-0000'],
    ['a path-traversal kid', '../../x'],
    ['an SQL-injection kid', "' OR 1=1--"],
    ['an empty kid', ''],
  ])('the service key but %s', async (_what, kid) => {
    expect401(await me(`Bearer ${await signRs256(claims(), { kid })}`));
  });

  it.each([
    ['a wrong iss', { iss: 'https://evil.example' }],
    ['a missing iss', { iss: undefined }],
    ['a wrong aud', { aud: 'some-other-service' }],
    ['a missing aud', { aud: undefined }],
    ['a missing exp', { exp: undefined }],
    ['a missing sub', { sub: undefined }],
    ['a missing sid', { sid: undefined }],
    ['a sub that is not a UUID', { sub: 'not-a-uuid' }],
    ['a sub with SQL in it', { sub: "' OR 1=1--" }],
    ['a sid that is not a UUID', { sid: 'not-a-uuid' }],
    ['a sid that is a number', { sid: 12345 }],
    ['an unknown (random UUID) sid', { sid: '9b2f3c1e-0000-4000-8000-000000000000' }],
    ['an unknown (random UUID) sub', { sub: '9b2f3c1e-0000-4000-8000-000000000001' }],
  ])('a validly signed token with %s', async (_what, overrides) => {
    expect401(await me(`Bearer ${await signRs256(claims(overrides))}`));
  });

  it('nbf in the future (beyond any leeway)', async () => {
    expect401(await me(`Bearer ${await signRs256(claims({ nbf: nowSeconds() + 60 }))}`));
  });

  it('wrong typ: JWT instead of at+jwt, and no typ at all', async () => {
    expect401(await me(`Bearer ${await signRs256(claims(), { typ: 'JWT' })}`));
    const noTyp = await new SignJWT(claims()).setProtectedHeader({ alg: 'RS256', kid: ctx.app.keys.signing.kid }).sign(ctx.app.keys.signing.privateKey);
    expect401(await me(`Bearer ${noTyp}`));
  });

  it('sid of another user\'s live session (sub of the caller)', async () => {
    // Control: bob's own claims on bob's session work.
    const bobs = await me(`Bearer ${await signRs256(claims({ sub: bob.id, sid: bobSessionId }))}`);
    expect(bobs.statusCode, bobs.body).toBe(200);
    expect401(await me(`Bearer ${await signRs256(claims({ sub: alice.id, sid: bobSessionId }))}`));
    expect401(await me(`Bearer ${await signRs256(claims({ sub: bob.id, sid: aliceSessionId }))}`));
  });

  it('a refresh token used as Bearer', async () => {
    const s = await signIn(ctx, { username: alice.username, password: alice.password });
    expect401(await me(`Bearer ${s.refreshToken}`));
  });

  it('a token whose session was revoked from another session of the same user', async () => {
    const s1 = await signIn(ctx, { username: alice.username, password: alice.password });
    const s2 = await signIn(ctx, { username: alice.username, password: alice.password });
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', s1.accessToken)).statusCode).toBe(200);
    const del = await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${s1.sessionId}`, s2.accessToken);
    expect(del.statusCode, del.body).toBe(204);
    expect401(await withBearer(ctx, 'GET', '/auth/v0/me', s1.accessToken));
    // The other session is untouched.
    const still = await withBearer(ctx, 'GET', '/auth/v0/me', s2.accessToken);
    expect(still.statusCode).toBe(200);
    expect(still.json().session_id).toBe(s2.sessionId);
  });

  it('a token whose session was ended by logout', async () => {
    const s = await signIn(ctx, { username: alice.username, password: alice.password });
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', s.accessToken)).statusCode).toBe(204);
    expect401(await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken));
  });

  it('an expired token: valid just before exp, refused once exp has passed (beyond the leeway)', async () => {
    const s = await signIn(ctx, { username: alice.username, password: alice.password });
    ctx.clock.advance(ACCESS_TTL - 1);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(200);
    ctx.clock.advance(1 + BEYOND_LEEWAY);
    expect401(await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken));
    // A hand-signed token whose exp is already past is refused too.
    const past = nowSeconds() - ACCESS_TTL - BEYOND_LEEWAY;
    expect401(await me(`Bearer ${await signRs256(claims({ iat: past, exp: past + ACCESS_TTL }))}`));
  });

  it('an unexpired token whose session has passed its absolute expiry', async () => {
    const s = await signIn(ctx, { username: alice.username, password: alice.password });
    ctx.clock.advance(SESSION_TTL + 1);
    // Signed now with a fresh exp: only the session's expiry can make it fail.
    const token = await signRs256(claims({ sid: s.sessionId }));
    expect401(await me(`Bearer ${token}`));
  });
});
