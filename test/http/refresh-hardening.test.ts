import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../../src/crypto/secrets.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, refresh, refreshCookieOf, setCookies, signIn, useFormat1Token } from '../helpers/flows.js';

/**
 * Refresh edge cases (docs/decisions.md, "Sessions and rotation"): only the canonical spelling
 * of a token is accepted, a sealed successor does not outlive its use, and the last second of a
 * session sends no cookie that a browser would drop at once.
 */

/** The base64url alphabet (RFC 4648 §5), in index order. */
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** The shortest session lifetime the configuration allows, in seconds. */
const SESSION_TTL = 60;

let grace: TestContext;
beforeAll(async () => {
  grace = await createTestContext({ REFRESH_REUSE_GRACE_SECONDS: '30', SESSION_TTL_SECONDS: String(SESSION_TTL) });
});
afterAll(async () => grace?.close());

/**
 * The same 32 bytes spelled with the unused low bits of the last character set (Node's decoder
 * ignores them). Only a token of format 1 has such bits: the 48 bytes of the current format fill
 * 64 characters exactly (test/http/refresh-token-format.test.ts).
 */
function respell(token: string): string {
  const last = ALPHABET.indexOf(token.at(-1)!);
  return token.slice(0, -1) + ALPHABET[(last & ~3) | 1]!;
}

function expectInvalid(res: LightMyRequestResponse): void {
  expect(res.statusCode, res.body).toBe(401);
  expect(res.json()).toEqual({ code: 'auth.invalid_refresh_token', message: expect.any(String) });
  expect(res.headers['set-cookie']).toBeUndefined();
}

async function sealOf(token: string): Promise<string | null | undefined> {
  const { rows } = await grace.db.query<{ successor_ciphertext: string | null }>('SELECT successor_ciphertext FROM refresh_tokens WHERE token_hash = $1', [sha256(token)]);
  return rows[0]?.successor_ciphertext;
}

async function sessionRevokedAt(sessionId: string): Promise<Date | null> {
  const { rows } = await grace.db.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM sessions WHERE id = $1', [sessionId]);
  return rows[0]!.revoked_at;
}

async function newFamily() {
  const user = await createVerifiedUser(grace);
  return signIn(grace, { username: user.username, password: user.password });
}

describe('refresh accepts only the canonical spelling of a token (grace window on)', () => {
  it("'A' x 42 + 'B' (not canonical) is 401 auth.invalid_refresh_token, not a 500", async () => {
    expectInvalid(await refresh(grace, `${'A'.repeat(42)}B`));
  });

  it('a live token of format 1 re-spelled is 401 auth.invalid_refresh_token and changes nothing', async () => {
    const s = await newFamily();
    const token = await useFormat1Token(grace, s.sessionId);
    expect(respell(token)).not.toBe(token);
    expect(Buffer.from(respell(token), 'base64url').equals(Buffer.from(token, 'base64url'))).toBe(true);
    expectInvalid(await refresh(grace, respell(token)));
    expect(await sessionRevokedAt(s.sessionId)).toBeNull();
    expect((await refresh(grace, token)).statusCode).toBe(200);
  });

  it('a rotated parent of format 1 re-spelled within the window is 401 auth.invalid_refresh_token, not a replay or reuse', async () => {
    const s = await newFamily();
    const token = await useFormat1Token(grace, s.sessionId);
    const rotated = await refresh(grace, token);
    expect(rotated.statusCode).toBe(200);
    expectInvalid(await refresh(grace, respell(token)));
    expect(await sessionRevokedAt(s.sessionId)).toBeNull();
    expect((await refresh(grace, refreshCookieOf(rotated).value)).statusCode).toBe(200);
  });
});

describe('a sealed successor is erased once it can no longer serve the grace window', () => {
  it('rotating the successor erases the seal its parent held; the parent is then reuse', async () => {
    const s = await newFamily();
    const t2 = refreshCookieOf(await refresh(grace, s.refreshToken)).value;
    expect(await sealOf(s.refreshToken)).toEqual(expect.any(String));
    const t3res = await refresh(grace, t2);
    expect(t3res.statusCode).toBe(200);
    expect(await sealOf(s.refreshToken)).toBeNull();
    expect(await sealOf(t2)).toEqual(expect.any(String));
    const again = await refresh(grace, s.refreshToken);
    expect(again.statusCode).toBe(401);
    expect(again.json().code).toBe('auth.refresh_token_reused');
  });

  it('the locking path (a parent replayed, then the live token rotated) erases the seal too', async () => {
    const s = await newFamily();
    const t2 = refreshCookieOf(await refresh(grace, s.refreshToken)).value;
    // A grace replay goes through the locking transaction and leaves the seal for the window.
    const replay = await refresh(grace, s.refreshToken);
    expect(refreshCookieOf(replay).value).toBe(t2);
    expect(await sealOf(s.refreshToken)).toEqual(expect.any(String));
    expect((await refresh(grace, t2)).statusCode).toBe(200);
    expect(await sealOf(s.refreshToken)).toBeNull();
  });
});

describe('the last second of a session', () => {
  it('a refresh with less than one second left is 401 auth.invalid_refresh_token with no cookie; one second left is Max-Age=1', async () => {
    // Both sessions end SESSION_TTL after now (the test clock moves only when told to). This test
    // runs last in the file: it moves the clock to the end of every session of this app.
    const a = await newFamily();
    const b = await newFamily();
    grace.clock.advance(SESSION_TTL - 1);
    const oneLeft = await refresh(grace, a.refreshToken);
    expect(oneLeft.statusCode, oneLeft.body).toBe(200);
    expect(refreshCookieOf(oneLeft).attributes['max-age']).toBe('1');
    grace.clock.advance(0.6);
    const last = await refresh(grace, b.refreshToken);
    expectInvalid(last);
    expect(setCookies(last)).toEqual([]);
  });

  it('a grace replay in the last second is 401 auth.invalid_refresh_token too, not reuse: the session stays unrevoked', async () => {
    const s = await newFamily();
    grace.clock.advance(SESSION_TTL - 1.5);
    const rotated = await refresh(grace, s.refreshToken);
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect(refreshCookieOf(rotated).attributes['max-age']).toBe('1');
    grace.clock.advance(0.7);
    expectInvalid(await refresh(grace, s.refreshToken));
    expect(await sessionRevokedAt(s.sessionId)).toBeNull();
  });
});
