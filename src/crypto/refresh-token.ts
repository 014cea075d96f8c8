import { randomBytes } from 'node:crypto';
import { newTimeOrderedId, UUID_BYTES, uuidBytes, uuidText } from './ids.js';
import { decodeCanonicalBase64url, sha256 } from './secrets.js';

/**
 * Refresh tokens (docs/api.md#refresh-token-format).
 *
 * A refresh token is 48 bytes in unpadded base64url (64 characters): the 16 bytes of its row's
 * id (a time-ordered UUID, version 7: src/crypto/ids.ts), then {@link REFRESH_TOKEN_SECRET_BYTES}
 * bytes from the CSPRNG, its secret of 256 bits. The database holds the id and the SHA-256 of the
 * token's text, never the token: a copy of the database yields no usable token. The id finds the
 * row through the primary key, and the hash confirms it. The tokens of sessions in use are
 * minutes old (a client refreshes every access-token lifetime or so), so their primary-key
 * entries share a few pages at the right edge of the index, which stay in memory. A lookup by the hash alone would read a random page of an index as large
 * as the table, and every rotation would insert into such an index (a *split token*;
 * docs/performance.md, "At a million users").
 *
 * Tokens issued before this format (format 1 in `refresh_tokens.format`) are 32 random bytes
 * (43 characters), found by their hash alone through a partial unique index that holds only
 * them (migration 020). They keep working until their sessions end; their successors have the
 * current format (format 2).
 */

/** Bytes of a refresh token's secret: 256 bits from the CSPRNG (docs/api.md#refresh-token-format). */
export const REFRESH_TOKEN_SECRET_BYTES = 32;
/** Bytes of a refresh token of the current format: its row's id, then its secret. */
export const REFRESH_TOKEN_BYTES = UUID_BYTES + REFRESH_TOKEN_SECRET_BYTES;
/** Characters of a refresh token of the current format: 48 bytes in unpadded base64url. */
const REFRESH_TOKEN_TEXT_LENGTH = 64;
/** Characters of a refresh token of format 1: 32 bytes in unpadded base64url. */
const FORMAT_1_TEXT_LENGTH = 43;

/** A refresh token just made: its row id, its text (for the cookie only) and the hash stored for it. */
export interface NewRefreshToken {
  /** The row id, a UUID version 7; also the token's first 16 bytes. */
  readonly id: string;
  /** The token, 64 base64url characters: goes into the refresh cookie and nowhere else. */
  readonly token: string;
  /** SHA-256 of `token`, base64url: what `refresh_tokens.token_hash` stores. */
  readonly tokenHash: string;
}

/** A new refresh token of the current format (docs/api.md#refresh-token-format); its id encodes this machine's time. */
export function newRefreshToken(): NewRefreshToken {
  const id = newTimeOrderedId();
  const token = Buffer.concat([uuidBytes(id), randomBytes(REFRESH_TOKEN_SECRET_BYTES)]).toString('base64url');
  return { id, token, tokenHash: sha256(token) };
}

/** A refresh token presented by a client, in a form the service issues. */
export interface PresentedRefreshToken {
  /** The token's text, as presented. */
  readonly token: string;
  /** SHA-256 of `token`, base64url: compared with `refresh_tokens.token_hash`. */
  readonly tokenHash: string;
  /** The row id the token names (current format), or null for a token of format 1, found by its hash. */
  readonly id: string | null;
}

/**
 * The bytes of a refresh token of either format: the canonical unpadded base64url spelling of
 * 48 bytes (current) or of 32 bytes (format 1), nothing else (docs/api.md#canonical-token-spelling).
 * @returns undefined for any other text (never throws).
 */
function decodeRefreshToken(token: string): Buffer | undefined {
  if (token.length !== REFRESH_TOKEN_TEXT_LENGTH && token.length !== FORMAT_1_TEXT_LENGTH) return undefined;
  const bytes = decodeCanonicalBase64url(token);
  return bytes?.length === REFRESH_TOKEN_BYTES || bytes?.length === REFRESH_TOKEN_SECRET_BYTES ? bytes : undefined;
}

/**
 * Reads a presented refresh token, of the current format or of format 1, in its one canonical
 * spelling (docs/api.md#canonical-token-spelling). Says nothing about whether the token exists.
 * @returns the token with its hash and id, or undefined for any other text (never throws).
 */
export function parseRefreshToken(token: string): PresentedRefreshToken | undefined {
  const bytes = decodeRefreshToken(token);
  if (bytes === undefined) return undefined;
  return { token, tokenHash: sha256(token), id: bytes.length === REFRESH_TOKEN_BYTES ? uuidText(bytes.subarray(0, UUID_BYTES)) : null };
}

/**
 * The raw bytes of a refresh token of either format, and its secret: the last 32 bytes (all of a
 * format 1 token). For the grace window's seal (src/crypto/successor-seal.ts).
 * @returns undefined when `token` is not a refresh token in a form the service issues.
 */
export function refreshTokenBytes(token: string): { readonly bytes: Buffer; readonly secret: Buffer } | undefined {
  const bytes = decodeRefreshToken(token);
  return bytes === undefined ? undefined : { bytes, secret: bytes.subarray(bytes.length - REFRESH_TOKEN_SECRET_BYTES) };
}
