import type { Queryable } from '../../db/db.js';

/** A refresh token row locked for rotation, with the state of its family (session). */
export interface LockedRefreshToken {
  id: string;
  session_id: string;
  user_id: string;
  rotated_at: Date | null;
  session_revoked_at: Date | null;
  session_expires_at: Date;
}

/** Stores a refresh token by its SHA-256 hash; `parentId` links it to the token it replaced. */
export async function insertRefreshToken(
  q: Queryable,
  t: { id: string; sessionId: string; tokenHash: string; parentId: string | null; now: Date },
): Promise<void> {
  await q.query(
    'INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at) VALUES ($1, $2, $3, $4, $5)',
    [t.id, t.sessionId, t.tokenHash, t.parentId, t.now],
  );
}

/**
 * Finds the token with this hash and locks its row and its session's row (`FOR UPDATE`) until
 * the transaction ends, so parallel refreshes, logouts and revocations of one family serialise.
 * @returns undefined when no token has this hash.
 */
export async function lockRefreshToken(q: Queryable, tokenHash: string): Promise<LockedRefreshToken | undefined> {
  const { rows } = await q.query<LockedRefreshToken>(
    `SELECT rt.id, rt.session_id, s.user_id, rt.rotated_at,
            s.revoked_at AS session_revoked_at, s.expires_at AS session_expires_at
       FROM refresh_tokens rt JOIN sessions s ON s.id = rt.session_id
      WHERE rt.token_hash = $1
      FOR UPDATE`,
    [tokenHash],
  );
  return rows[0];
}

/**
 * Marks a token rotated (replaced) if it is still live. Guarded, so of two callers only one wins.
 * @returns true when this call rotated it.
 */
export async function markRotated(q: Queryable, tokenId: string, now: Date): Promise<boolean> {
  const { rowCount } = await q.query(
    'UPDATE refresh_tokens SET rotated_at = $2 WHERE id = $1 AND rotated_at IS NULL',
    [tokenId, now],
  );
  return rowCount === 1;
}
