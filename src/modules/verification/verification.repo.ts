import type { Queryable } from '../../db/db.js';

/** A live (unconsumed, unsuperseded, unexpired) verification code row. */
export interface VerificationCodeRow {
  id: string;
  user_id: string;
  email: string;
  code_hash: string;
  attempts: number;
  expires_at: Date;
}

/**
 * Supersedes every older code of the user (docs/api.md#verification-codes: a new code supersedes older ones;
 * docs/api.md#verification-codes) and inserts the new one, stored as its HMAC.
 */
export async function replaceCode(
  q: Queryable,
  c: { id: string; userId: string; email: string; codeHash: string; now: Date; expiresAt: Date },
): Promise<void> {
  await q.query(
    `UPDATE verification_codes SET superseded_at = $2
      WHERE user_id = $1 AND consumed_at IS NULL AND superseded_at IS NULL`,
    [c.userId, c.now],
  );
  await q.query(
    `INSERT INTO verification_codes (id, user_id, email, code_hash, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [c.id, c.userId, c.email, c.codeHash, c.now, c.expiresAt],
  );
}

/**
 * The user's latest live (unconsumed, unsuperseded, unexpired at `now`) code for `email`,
 * locked `FOR UPDATE` until the transaction ends, so that attempts on one code serialise: a
 * second submission waits and then sees the first one's outcome (a consumed code is no longer
 * live). Undefined when there is none.
 */
export async function lockLiveCode(q: Queryable, userId: string, email: string, now: Date): Promise<VerificationCodeRow | undefined> {
  const { rows } = await q.query<VerificationCodeRow>(
    `SELECT id, user_id, email, code_hash, attempts, expires_at FROM verification_codes
      WHERE user_id = $1 AND email = $2 AND consumed_at IS NULL AND superseded_at IS NULL AND expires_at > $3
      ORDER BY created_at DESC LIMIT 1
      FOR UPDATE`,
    [userId, email, now],
  );
  return rows[0];
}

/** Counts one wrong attempt against a code. @returns the attempts made so far. */
export async function recordWrongAttempt(q: Queryable, codeId: string): Promise<number> {
  const { rows } = await q.query<{ attempts: number }>(
    'UPDATE verification_codes SET attempts = attempts + 1 WHERE id = $1 RETURNING attempts',
    [codeId],
  );
  return rows[0]?.attempts ?? Number.MAX_SAFE_INTEGER;
}

/**
 * Consumes a code once: `UPDATE ... WHERE consumed_at IS NULL` tells the winner of a race
 * from the losers (STYLE habit 4).
 * @returns true for the one caller that consumed it.
 */
export async function consumeCode(q: Queryable, codeId: string, now: Date): Promise<boolean> {
  const { rowCount } = await q.query(
    'UPDATE verification_codes SET consumed_at = $2 WHERE id = $1 AND consumed_at IS NULL AND superseded_at IS NULL',
    [codeId, now],
  );
  return rowCount === 1;
}
