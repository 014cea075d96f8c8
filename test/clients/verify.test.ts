import { createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express from 'express';
import Fastify from 'fastify';
import { decodeProtectedHeader, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyFiles } from '../../src/modules/keys/keys.cli.js';
import { latchkeyMiddleware } from '../../packages/verify/src/express.js';
import { authOf, latchkeyAuth } from '../../packages/verify/src/fastify.js';
import { createVerifier, VerifyError, type Verifier, type VerifyErrorCode } from '../../packages/verify/src/index.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, signIn, withBearer } from '../helpers/flows.js';

/** A service on a loopback port, and every path it was asked for. */
async function listen(ctx: TestContext, port = 0): Promise<{ origin: string; seen: string[] }> {
  const seen: string[] = [];
  ctx.app.server.on('request', (req: { url?: string }) => seen.push((req.url ?? '').split('?')[0]!));
  await ctx.app.listen({ host: '127.0.0.1', port });
  return { origin: `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`, seen };
}

/** The code of the VerifyError that `promise` rejects with. */
async function refusalCode(promise: Promise<unknown>): Promise<VerifyErrorCode> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(VerifyError);
  return (err as VerifyError).code;
}

/** The sign-in body for a user made by createVerifiedUser. */
const creds = (u: { username: string; password: string }) => ({ username: u.username, password: u.password });

const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('@latchkey/verify against a running service', () => {
  let ctx: TestContext;
  let origin: string;
  let seen: string[];
  let verifier: Verifier;
  let user: Awaited<ReturnType<typeof createVerifiedUser>>;
  let session: Awaited<ReturnType<typeof signIn>>;
  const jwksPath = '/auth/v0/.well-known/jwks.json';

  beforeAll(async () => {
    ctx = await createTestContext();
    ({ origin, seen } = await listen(ctx));
    verifier = createVerifier({ jwksUrl: `${origin}${jwksPath}`, issuer: ctx.config.jwt.issuer, audience: ctx.config.jwt.audience });
    user = await createVerifiedUser(ctx);
    session = await signIn(ctx, creds(user));
  });
  afterAll(async () => ctx?.close());

  /** A token signed with the service's own key, with header and claims changed. */
  function signWithServiceKey(header: Record<string, unknown>, claims: Record<string, unknown>): Promise<string> {
    const kid = decodeProtectedHeader(session.accessToken).kid;
    const payload = JSON.parse(Buffer.from(session.accessToken.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    return new SignJWT({ ...payload, ...claims }).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid, ...header }).sign(ctx.app.keys.signing.privateKey);
  }

  it('accepts a valid access token: user, session, amr and claims', async () => {
    const verified = await verifier.verify(session.accessToken);
    expect(verified.userId).toBe(user.id);
    expect(verified.sessionId).toBe(session.sessionId);
    expect(verified.amr).toEqual(['pwd']); // RFC 8176: signed in with a password
    expect(verified.claims).toMatchObject({ sub: user.id, sid: session.sessionId, iss: ctx.config.jwt.issuer, aud: ctx.config.jwt.audience });
    expect(await verifier.verifyAuthorization(`bearer   ${session.accessToken}`)).toMatchObject({ userId: user.id });
  });

  it('refuses an expired token (beyond 5 s of leeway) with expired', async () => {
    ctx.clock.advance(-(ctx.config.jwt.accessTokenTtlSeconds + 10));
    try {
      const old = await signIn(ctx, creds(user));
      expect(await refusalCode(verifier.verify(old.accessToken))).toBe('expired');
    } finally {
      ctx.clock.advance(ctx.config.jwt.accessTokenTtlSeconds + 10);
    }
  });

  it('refuses a token whose payload or signature was changed with invalid_signature', async () => {
    const [header, payload, signature] = session.accessToken.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forged = `${header}.${b64({ ...claims, sub: '00000000-0000-4000-8000-000000000000' })}.${signature}`;
    expect(await refusalCode(verifier.verify(forged))).toBe('invalid_signature');
    const flipped = signature.slice(0, 10) + (signature[10] === 'A' ? 'B' : 'A') + signature.slice(11);
    expect(await refusalCode(verifier.verify(`${header}.${payload}.${flipped}`))).toBe('invalid_signature');
  });

  it('refuses alg none and HS256 keyed with the public key (RFC 8725 §2.1) with algorithm_not_allowed', async () => {
    const [header, payload] = session.accessToken.split('.') as [string, string];
    const headerJson = JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as Record<string, unknown>;
    expect(await refusalCode(verifier.verify(`${b64({ ...headerJson, alg: 'none' })}.${payload}.`))).toBe('algorithm_not_allowed');
    const publicPem = createPublicKey(ctx.app.keys.signing.privateKey).export({ type: 'spki', format: 'pem' });
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    const hs256 = await new SignJWT(claims).setProtectedHeader({ ...headerJson, alg: 'HS256' }).sign(new TextEncoder().encode(String(publicPem)));
    expect(await refusalCode(verifier.verify(hs256))).toBe('algorithm_not_allowed');
  });

  it('refuses another typ, issuer or audience, missing claims, and malformed input, each with its code', async () => {
    expect(await refusalCode(verifier.verify(await signWithServiceKey({ typ: 'JWT' }, {})))).toBe('invalid_type');
    expect(await refusalCode(verifier.verify(await signWithServiceKey({}, { iss: 'someone-else' })))).toBe('invalid_issuer');
    expect(await refusalCode(verifier.verify(await signWithServiceKey({}, { aud: 'billing' })))).toBe('invalid_audience');
    expect(await refusalCode(verifier.verify(await signWithServiceKey({}, { sid: undefined })))).toBe('invalid_claims');
    expect(await refusalCode(verifier.verify(await signWithServiceKey({}, { nbf: Math.floor(Date.now() / 1000) + 60 })))).toBe('not_yet_valid');
    const other = createVerifier({ jwksUrl: `${origin}${jwksPath}`, issuer: ctx.config.jwt.issuer, audience: 'billing' });
    expect(await refusalCode(other.verify(session.accessToken))).toBe('invalid_audience');
    expect(await refusalCode(verifier.verify('not.a.token'))).toBe('malformed');
    expect(await refusalCode(verifier.verify(undefined))).toBe('missing_token');
    expect(await refusalCode(verifier.verifyAuthorization(undefined))).toBe('missing_token');
    expect(await refusalCode(verifier.verifyAuthorization(`Basic ${session.accessToken}`))).toBe('malformed');
  });

  it('an unknown kid is refused with unknown_key and does not make it fetch the JWKS in a loop', async () => {
    await verifier.verify(session.accessToken); // keys cached
    const before = seen.filter((p) => p === jwksPath).length;
    const unknown = await signWithServiceKey({ kid: 'no-such-key-id' }, {});
    for (let i = 0; i < 20; i++) expect(await refusalCode(verifier.verify(unknown))).toBe('unknown_key');
    // Within the 30 s cooldown after the last fetch: no fetch at all, or one if that had passed.
    expect(seen.filter((p) => p === jwksPath).length - before).toBeLessThanOrEqual(1);
  });

  it('keys that cannot be fetched: unavailable (status 503)', async () => {
    const nowhere = createVerifier({ jwksUrl: 'http://127.0.0.1:9/auth/v0/.well-known/jwks.json', issuer: 'latchkey', audience: 'latchkey' });
    const err = await nowhere.verify(session.accessToken).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'unavailable', status: 503 });
  });

  it('checkSession: a revoked session is refused once cacheSeconds have passed; one /me call per token per period', async () => {
    const live = await signIn(ctx, creds(user));
    const checked = createVerifier({
      jwksUrl: `${origin}${jwksPath}`,
      issuer: ctx.config.jwt.issuer,
      audience: ctx.config.jwt.audience,
      checkSession: { baseUrl: origin, cacheSeconds: 1 },
    });
    const meCalls = () => seen.filter((p) => p === '/auth/v0/me').length;
    const before = meCalls();
    await Promise.all([checked.verify(live.accessToken), checked.verify(live.accessToken)]);
    for (let i = 0; i < 5; i++) expect((await checked.verify(live.accessToken)).sessionId).toBe(live.sessionId);
    expect(meCalls() - before).toBe(1);

    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', live.accessToken)).statusCode).toBe(204);
    // Within cacheSeconds the cached "active" may still be used; after it, the revocation is seen.
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await refusalCode(checked.verify(live.accessToken))).toBe('session_inactive');
    expect(await refusalCode(checked.verify(live.accessToken))).toBe('session_inactive');
    expect(meCalls() - before).toBe(2);
    // The signature alone still accepts it (docs/integration.md): that is what checkSession adds.
    expect((await verifier.verify(live.accessToken)).sessionId).toBe(live.sessionId);

    // cacheSeconds 0: refused at the first request after the logout.
    const strict = createVerifier({ jwksUrl: `${origin}${jwksPath}`, issuer: ctx.config.jwt.issuer, audience: ctx.config.jwt.audience, checkSession: { baseUrl: origin, cacheSeconds: 0 } });
    const second = await signIn(ctx, creds(user));
    expect((await strict.verify(second.accessToken)).userId).toBe(user.id);
    expect((await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${second.sessionId}`, second.accessToken)).statusCode).toBe(204);
    expect(await refusalCode(strict.verify(second.accessToken))).toBe('session_inactive');
  });

  it('the Fastify plugin sets request.auth, or answers 401 with the Error body', async () => {
    const api = Fastify();
    await api.register(async (scope) => {
      await scope.register(latchkeyAuth, { verifier });
      scope.get('/private', async (request) => ({ user: authOf(request).userId }));
    });
    api.get('/public', async () => ({ ok: true }));
    try {
      const ok = await api.inject({ method: 'GET', url: '/private', headers: { authorization: `Bearer ${session.accessToken}` } });
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toEqual({ user: user.id });
      const missing = await api.inject({ method: 'GET', url: '/private' });
      expect(missing.statusCode).toBe(401);
      expect(missing.json()).toEqual({ code: 'auth.missing_access_token', message: 'An access token is required: send Authorization: Bearer <token>.' });
      const bad = await api.inject({ method: 'GET', url: '/private', headers: { authorization: `Bearer ${session.accessToken}x` } });
      expect(bad.statusCode).toBe(401);
      expect(bad.json()).toEqual({ code: 'auth.invalid_access_token', message: 'The access token is invalid, expired, or its session has ended.' });
      expect((await api.inject({ method: 'GET', url: '/public' })).statusCode).toBe(200);
    } finally {
      await api.close();
    }
  });

  it('the Express middleware sets req.auth, or answers 401 with the Error body, in a real Express app', async () => {
    const app = express();
    app.get('/private', latchkeyMiddleware(verifier), (req, res) => {
      res.json({ user: (req as { auth?: { userId: string } }).auth?.userId });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const ok = await fetch(`${base}/private`, { headers: { authorization: `Bearer ${session.accessToken}` } });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ user: user.id });
      const bad = await fetch(`${base}/private`, { headers: { authorization: 'Bearer abc.def.ghi' } });
      expect(bad.status).toBe(401);
      expect(bad.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await bad.json()).toEqual({ code: 'auth.invalid_access_token', message: 'The access token is invalid, expired, or its session has ended.' });
      const missing = await fetch(`${base}/private`);
      expect(missing.status).toBe(401);
      expect(((await missing.json()) as { code: string }).code).toBe('auth.missing_access_token');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe('@latchkey/verify across a signing-key rotation on the service', () => {
  const keysDir = mkdtempSync(path.join(tmpdir(), 'verify-rotation-'));
  const open: TestContext[] = [];
  afterAll(async () => {
    for (const ctx of open) await ctx.close().catch(() => {});
    rmSync(keysDir, { recursive: true, force: true });
  });

  it('picks up the new kid from the JWKS and still accepts tokens of the retired key', async () => {
    const [keyA, keyB] = await Promise.all([generateKeyFiles({ outDir: keysDir }), generateKeyFiles({ outDir: keysDir })]);
    const before = await createTestContext({ JWT_PRIVATE_KEY_FILE: keyA.privateKeyFile });
    open.push(before);
    const { origin } = await listen(before);
    const port = Number(new URL(origin).port);
    const verifier = createVerifier({ jwksUrl: `${origin}/auth/v0/.well-known/jwks.json`, issuer: 'latchkey', audience: 'latchkey', jwksCooldownSeconds: 1 });
    const alice = await createVerifiedUser(before);
    const tokenA = (await signIn(before, creds(alice))).accessToken;
    expect(decodeProtectedHeader(tokenA).kid).toBe(keyA.kid);
    expect((await verifier.verify(tokenA)).userId).toBe(alice.id);
    await before.app.close();

    // The service restarts on the same address signing with B, A still published (docs/key-rotation.md).
    const after = await createTestContext({ JWT_PRIVATE_KEY_FILE: keyB.privateKeyFile, JWT_PUBLIC_KEY_FILES: keyA.publicKeyFile });
    open.push(after);
    await listen(after, port);
    const bob = await createVerifiedUser(after);
    const tokenB = (await signIn(after, creds(bob))).accessToken;
    expect(decodeProtectedHeader(tokenB).kid).toBe(keyB.kid);
    await new Promise((r) => setTimeout(r, 1_100)); // the refetch cooldown since the first fetch
    expect((await verifier.verify(tokenB)).userId).toBe(bob.id);
    expect((await verifier.verify(tokenA)).userId).toBe(alice.id);
  });
});
