import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { AppError } from '../../errors.js';
import { uuidText } from '../../crypto/ids.js';
import { constantTimeEqual, decodeCanonicalBase64url, sha256 } from '../../crypto/secrets.js';
import type { RateLimiter, RateLimitRule } from '../rate-limits/rate-limits.service.js';
import { findAdminKeyForCheck, insertAdminKey, touchAdminKey } from './admin-keys.repo.js';

/** What an admin API key may do (docs/admin-api.md#scopes); every admin route needs one of them. */
export const ADMIN_SCOPES = ['users:read', 'users:write', 'sessions:write', 'webhooks', 'audit:read'] as const;
export type AdminScope = (typeof ADMIN_SCOPES)[number];

/** Every admin API key starts with this, so a secret scanner (and a human) can tell one from other tokens. */
export const ADMIN_KEY_PREFIX = 'lk_admin_';
/** Bytes of a key's secret part: 256 bits from the CSPRNG, like a refresh token. */
export const ADMIN_KEY_SECRET_BYTES = 32;
/** Longest key name, in characters (migration 016). */
export const ADMIN_KEY_NAME_MAX_LENGTH = 64;

/**
 * A key's text: the prefix, the key's id (its UUID as 32 lower-case hex digits), `_`, and the
 * secret (32 bytes in unpadded base64url, 43 characters, which may themselves contain `_`: the
 * parts have fixed lengths).
 */
const ADMIN_KEY_TEXT = /^lk_admin_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;

/** `Authorization: Bearer <key>` (RFC 6750 §2.1; the scheme is case-insensitive). */
const BEARER = /^Bearer +(\S+) *$/i;

/**
 * The hash an unknown key id is compared with: the SHA-256 of a key nobody holds. Checking a key
 * whose id exists and one whose id does not then costs the same read, hash and comparison
 * (docs/security.md, "Admin API").
 */
const NO_KEY_HASH = sha256(`${ADMIN_KEY_PREFIX}${'0'.repeat(32)}_${'A'.repeat(43)}`);

/**
 * The id of an admin API key's text, when the text has the form the service issues (the
 * secret's base64url canonical); undefined otherwise. Says nothing about whether the key exists.
 */
export function adminKeyId(text: string): string | undefined {
  const m = ADMIN_KEY_TEXT.exec(text);
  if (m === null || decodeCanonicalBase64url(m[2]!)?.length !== ADMIN_KEY_SECRET_BYTES) return undefined;
  return uuidText(Buffer.from(m[1]!, 'hex'));
}

/**
 * Makes and stores a new admin API key (`latchkey admin-keys create`). Only the SHA-256 of its
 * text is stored: the secret has 256 bits of entropy, so a slow password hash would add nothing
 * but cost to every request (docs/security.md, "Admin API").
 * @param k.scopes distinct scopes of {@link ADMIN_SCOPES} (the caller checks them).
 * @param k.expiresAt when the key stops working; null: never.
 * @returns the key's id and its text, which is never shown again.
 */
export async function createAdminKey(
  db: Db,
  k: { name: string; scopes: readonly AdminScope[]; expiresAt: Date | null; now: Date },
): Promise<{ id: string; key: string }> {
  const id = randomUUID();
  const key = `${ADMIN_KEY_PREFIX}${id.replaceAll('-', '')}_${randomBytes(ADMIN_KEY_SECRET_BYTES).toString('base64url')}`;
  await insertAdminKey(db, { id, name: k.name, scopes: k.scopes, keyHash: sha256(key), createdAt: k.now, expiresAt: k.expiresAt });
  return { id, key };
}

/** Who makes an admin request: the key that authenticated it. */
export interface AdminKeyIdentity {
  readonly keyId: string;
  readonly keyName: string;
  readonly scopes: readonly string[];
}

/** Checks the admin API key of each request (docs/admin-api.md#api-keys). */
export interface AdminKeyAuthenticator {
  /**
   * Checks `Authorization: Bearer <admin API key>`: one primary-key read by the id in the key,
   * then the SHA-256 of the presented key compared in constant time with the stored hash (with
   * a hash no key has when the id is unknown, at the same cost). A live key's request is then
   * counted against its rate limit (`rule`), and its `last_used_at` written when it is at least
   * a minute old.
   * @throws AppError `admin.invalid_api_key` (401) for no key, a malformed, unknown, wrong,
   *   revoked or expired one; `admin.too_many_requests` (429, Retry-After) over the key's limit.
   */
  authenticate(authorization: string | undefined): Promise<AdminKeyIdentity>;
}

/** Builds the {@link AdminKeyAuthenticator}. */
export function createAdminKeyAuthenticator(deps: {
  readonly db: Db;
  readonly clock: Clock;
  readonly limiter: RateLimiter;
  /** The per-key limit (RATE_LIMIT_ADMIN_PER_KEY per minute). */
  readonly rule: RateLimitRule;
  readonly log: FastifyBaseLogger;
}): AdminKeyAuthenticator {
  const { db, clock, limiter, rule, log } = deps;
  return {
    async authenticate(authorization) {
      const presented = authorization === undefined ? undefined : BEARER.exec(authorization)?.[1];
      const id = presented === undefined ? undefined : adminKeyId(presented);
      if (presented === undefined || id === undefined) throw new AppError('admin.invalid_api_key');
      const now = clock.now();
      const row = await findAdminKeyForCheck(db, id, now);
      const matches = constantTimeEqual(sha256(presented), row?.key_hash ?? NO_KEY_HASH);
      if (row === undefined || !matches || row.dead) {
        log.info({ keyId: id, reason: row === undefined ? 'unknown_key' : !matches ? 'wrong_key' : 'dead_key' }, 'admin API key refused');
        throw new AppError('admin.invalid_api_key');
      }
      await limiter.enforce(rule, id, 'admin.too_many_requests', () => log.warn({ keyId: id }, 'admin API key over its rate limit'));
      if (row.last_use_stale) await touchAdminKey(db, id, now);
      return { keyId: id, keyName: row.name, scopes: row.scopes };
    },
  };
}
