import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, signIn, withBearer } from '../helpers/flows.js';

const execFileAsync = promisify(execFile);

/** The runnable example of docs/integration.md. */
const EXAMPLE = path.resolve(import.meta.dirname, '..', '..', 'examples', 'verify-token.mjs');

/** Runs the example with `env` and the token as its argument; never rejects on a non-zero exit. */
async function verifyWithExample(token: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [EXAMPLE, token], { env: { PATH: process.env.PATH ?? '', ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** Replaces one character in the middle of a base64url segment (keeps it decodable). */
function flipCharacter(segment: string): string {
  const i = Math.floor(segment.length / 2);
  return segment.slice(0, i) + (segment[i] === 'A' ? 'B' : 'A') + segment.slice(i + 1);
}

describe('examples/verify-token.mjs against a running service (docs/integration.md)', () => {
  let ctx: TestContext;
  let env: Record<string, string>;
  let user: Awaited<ReturnType<typeof createVerifiedUser>>;
  let accessToken: string;

  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = ctx.app.server.address() as AddressInfo;
    env = {
      AUTH_JWKS_URL: `http://127.0.0.1:${port}/auth/v0/.well-known/jwks.json`,
      AUTH_ISSUER: ctx.config.jwt.issuer,
      AUTH_AUDIENCE: ctx.config.jwt.audience,
    };
    user = await createVerifiedUser(ctx);
    accessToken = (await signIn(ctx, { username: user.username, password: user.password })).accessToken;
  });
  afterAll(async () => ctx?.close());

  it('accepts a valid access token and prints its claims (sub = user id, sid = session id)', async () => {
    const res = await verifyWithExample(accessToken, env);
    expect(res.code, res.stderr).toBe(0);
    const out = JSON.parse(res.stdout) as { valid: boolean; kid: string; claims: Record<string, unknown> };
    expect(out.valid).toBe(true);
    expect(out.kid).toBe((JSON.parse(ctx.app.keys.jwksJson) as { keys: { kid: string }[] }).keys[0]!.kid);
    expect(out.claims).toMatchObject({ sub: user.id, iss: ctx.config.jwt.issuer, aud: ctx.config.jwt.audience });
    expect(out.claims.sid).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('refuses a tampered token (payload or signature changed), exit 1', async () => {
    const [header, payload, signature] = accessToken.split('.') as [string, string, string];
    const forgedPayload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')), sub: '00000000-0000-4000-8000-000000000000' })).toString('base64url');
    for (const tampered of [`${header}.${forgedPayload}.${signature}`, `${header}.${payload}.${flipCharacter(signature)}`]) {
      const res = await verifyWithExample(tampered, env);
      expect(res.code).toBe(1);
      expect(res.stdout).toBe('');
      expect(res.stderr).toMatch(/^invalid token: ERR_JWS_SIGNATURE_VERIFICATION_FAILED/);
    }
  });

  it('refuses a token for another audience or issuer, exit 1', async () => {
    const audience = await verifyWithExample(accessToken, { ...env, AUTH_AUDIENCE: 'billing-service' });
    expect(audience.code).toBe(1);
    expect(audience.stderr).toMatch(/ERR_JWT_CLAIM_VALIDATION_FAILED.*aud/);
    const issuer = await verifyWithExample(accessToken, { ...env, AUTH_ISSUER: 'someone-else' });
    expect(issuer.code).toBe(1);
    expect(issuer.stderr).toMatch(/ERR_JWT_CLAIM_VALIDATION_FAILED.*iss/);
  });

  it('as documented: after logout the token is refused by /me but still verifies with the JWKS alone until it expires', async () => {
    const session = await signIn(ctx, { username: user.username, password: user.password });
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', session.accessToken)).statusCode).toBe(204);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(401);
    expect((await verifyWithExample(session.accessToken, env)).code).toBe(0);
  });

  it('without a JWKS URL it prints its usage, exit 2', async () => {
    const res = await verifyWithExample(accessToken, {});
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/^usage: AUTH_JWKS_URL=/);
  });
});
