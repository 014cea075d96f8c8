import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { sha256 } from '../../src/crypto/secrets.js';
import { sealSuccessor } from '../../src/crypto/successor-seal.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, refresh, refreshCookieOf, signIn, useFormat1Token } from '../helpers/flows.js';

/**
 * The refresh token's format (docs/api.md#refresh-token-format): 48 bytes in base64url, its row's
 * id (a UUID version 7) and then 256 random bits. The rotation finds the row by the id and
 * confirms it by the token's SHA-256; the database never holds the token. Tokens of format 1
 * (32 random bytes, issued before) are found by their hash, keep working, and are replaced by
 * tokens of the current format.
 */

/** The grace window of the `grace` app, in seconds. */
const GRACE = 30;
/** A token of the current format: 48 bytes in unpadded base64url. */
const CURRENT_FORMAT = /^[A-Za-z0-9_-]{64}$/;

let strict: TestContext;
let grace: TestContext;
beforeAll(async () => {
  [strict, grace] = await Promise.all([createTestContext(), createTestContext({ REFRESH_REUSE_GRACE_SECONDS: String(GRACE) })]);
});
afterAll(async () => {
  await Promise.all([strict?.close(), grace?.close()]);
});

async function newFamily(ctx: TestContext) {
  const user = await createVerifiedUser(ctx);
  return signIn(ctx, { username: user.username, password: user.password });
}

/** Refreshes and expects 200; returns the new cookie's value. */
async function rotate(ctx: TestContext, token: string): Promise<string> {
  const res = await refresh(ctx, token);
  expect(res.statusCode, res.body).toBe(200);
  return refreshCookieOf(res).value;
}

function expectError(res: LightMyRequestResponse, code: string): void {
  expect(res.statusCode, res.body).toBe(401);
  expect(res.json()).toEqual({ code, message: expect.any(String) });
  expect(res.headers['set-cookie']).toBeUndefined();
}

/** The UUID (lower-case text) that a token of the current format names: its first 16 bytes. */
function idOf(token: string): string {
  const hex = Buffer.from(token, 'base64url').subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A token of the current format with the id of `idFrom` and the secret of `secretFrom`. */
function splice(idFrom: string, secretFrom: string): string {
  return Buffer.concat([Buffer.from(idFrom, 'base64url').subarray(0, 16), Buffer.from(secretFrom, 'base64url').subarray(16)]).toString('base64url');
}

async function tokenRow(ctx: TestContext, token: string) {
  const { rows } = await ctx.db.query<{ id: string; parent_id: string | null; format: number; rotated: boolean }>(
    'SELECT id, parent_id, format, rotated_at IS NOT NULL AS rotated FROM refresh_tokens WHERE token_hash = $1',
    [sha256(token)],
  );
  expect(rows).toHaveLength(1);
  return rows[0]!;
}

async function sessionRevokedAt(ctx: TestContext, sessionId: string): Promise<Date | null> {
  const { rows } = await ctx.db.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM sessions WHERE id = $1', [sessionId]);
  return rows[0]!.revoked_at;
}

describe('the current format', () => {
  it('sign-in and refresh give out 64 base64url characters: the row id (UUID version 7), then 32 random bytes; the database holds the id and the SHA-256, never the token or its secret', async () => {
    const s = await newFamily(strict);
    const t2 = await rotate(strict, s.refreshToken);
    for (const token of [s.refreshToken, t2]) {
      expect(token).toMatch(CURRENT_FORMAT);
      expect(Buffer.from(token, 'base64url')).toHaveLength(48);
      expect(idOf(token)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    expect(await tokenRow(strict, s.refreshToken)).toEqual({ id: idOf(s.refreshToken), parent_id: null, format: 2, rotated: true });
    expect(await tokenRow(strict, t2)).toEqual({ id: idOf(t2), parent_id: idOf(s.refreshToken), format: 2, rotated: false });
    const { rows } = await strict.db.query<{ j: string }>('SELECT row_to_json(rt)::text AS j FROM refresh_tokens rt WHERE session_id = $1', [s.sessionId]);
    expect(rows).toHaveLength(2);
    for (const token of [s.refreshToken, t2]) {
      const secret = Buffer.from(token, 'base64url').subarray(16);
      for (const form of [token, secret.toString('base64url'), secret.toString('hex'), secret.toString('base64')]) {
        for (const { j } of rows) expect(j).not.toContain(form);
      }
    }
  });

  it("a rotated token's id with another secret is invalid, not reuse: the session stays and its live token still rotates", async () => {
    const s = await newFamily(strict);
    const t2 = await rotate(strict, s.refreshToken);
    expectError(await refresh(strict, splice(s.refreshToken, t2)), 'auth.invalid_refresh_token');
    expectError(await refresh(strict, splice(s.refreshToken, randomBytes(48).toString('base64url'))), 'auth.invalid_refresh_token');
    expect(await sessionRevokedAt(strict, s.sessionId)).toBeNull();
    expect(await tokenRow(strict, t2)).toMatchObject({ rotated: false });
    await rotate(strict, t2);
  });

  it("the live token's id with another secret is invalid and rotates nothing", async () => {
    const s = await newFamily(strict);
    expectError(await refresh(strict, splice(s.refreshToken, randomBytes(48).toString('base64url'))), 'auth.invalid_refresh_token');
    expect(await tokenRow(strict, s.refreshToken)).toMatchObject({ rotated: false });
    await rotate(strict, s.refreshToken);
  });

  it('48 random bytes (an id no row has) are invalid', async () => {
    expectError(await refresh(strict, randomBytes(48).toString('base64url')), 'auth.invalid_refresh_token');
  });

  it('has a single spelling: 48 bytes fill 64 characters with no unused bits, so any other character is another token; padding or another length is invalid', async () => {
    const s = await newFamily(strict);
    const token = s.refreshToken;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    for (const c of alphabet.replace(token.at(-1)!, '')) {
      expect(Buffer.from(token.slice(0, -1) + c, 'base64url').equals(Buffer.from(token, 'base64url'))).toBe(false);
    }
    for (const other of [`${token}=`, `${token}A`, token.slice(0, -1), token.replaceAll('-', '+').replaceAll('_', '/')]) {
      if (other === token) continue;
      expectError(await refresh(strict, other), 'auth.invalid_refresh_token');
    }
    expect(await sessionRevokedAt(strict, s.sessionId)).toBeNull();
    await rotate(strict, token);
  });
});

describe('the indexes a rotation writes', () => {
  it("no index that a token of the current format enters reads the token's hash: only the partial index of format 1 does", async () => {
    const { rows } = await strict.db.query<{ index: string; predicate: string | null }>(
      `SELECT ic.relname AS index, pg_get_expr(i.indpred, i.indrelid) AS predicate
         FROM pg_index i
         JOIN pg_class ic ON ic.oid = i.indexrelid
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attname = 'token_hash'
        WHERE i.indrelid = 'refresh_tokens'::regclass
          AND (a.attnum = ANY(i.indkey::int2[]) OR coalesce(pg_get_expr(i.indexprs, i.indrelid), '') ~ '\\mtoken_hash\\M')`,
    );
    expect(rows).toEqual([{ index: 'refresh_tokens_format_1_hash_key', predicate: '(format = 1)' }]);
  });
});

describe('tokens of format 1, issued before the current format', () => {
  it('rotate into a token of the current format; presented again, they are reuse and revoke the session', async () => {
    const s = await newFamily(strict);
    const old = await useFormat1Token(strict, s.sessionId);
    expect(old).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const t2 = await rotate(strict, old);
    expect(t2).toMatch(CURRENT_FORMAT);
    const oldRow = await tokenRow(strict, old);
    expect(oldRow).toMatchObject({ format: 1, rotated: true });
    expect(await tokenRow(strict, t2)).toEqual({ id: idOf(t2), parent_id: oldRow.id, format: 2, rotated: false });
    expectError(await refresh(strict, old), 'auth.refresh_token_reused');
    expect(await sessionRevokedAt(strict, s.sessionId)).not.toBeNull();
    expectError(await refresh(strict, t2), 'auth.invalid_refresh_token');
  });

  it('within a grace window, a parent of format 1 presented again gets the live token of the current format', async () => {
    const s = await newFamily(grace);
    const old = await useFormat1Token(grace, s.sessionId);
    const t2 = await rotate(grace, old);
    expect(await rotate(grace, old)).toBe(t2);
    expect(await sessionRevokedAt(grace, s.sessionId)).toBeNull();
    await rotate(grace, t2);
  });

  it('a successor of format 1 sealed under its parent before the upgrade still opens within the window', async () => {
    const s = await newFamily(grace);
    const parent = await useFormat1Token(grace, s.sessionId);
    await rotate(grace, parent);
    // As an earlier version left it: the live successor is of format 1 too, sealed under the parent.
    const child = await useFormat1Token(grace, s.sessionId);
    const { rowCount } = await grace.db.query('UPDATE refresh_tokens SET successor_ciphertext = $2 WHERE token_hash = $1', [sha256(parent), sealSuccessor(parent, child)]);
    expect(rowCount).toBe(1);
    expect(await rotate(grace, parent)).toBe(child);
    expect(await rotate(grace, child)).toMatch(CURRENT_FORMAT);
  });
});
