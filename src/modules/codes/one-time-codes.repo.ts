import type { Queryable } from '../../db/db.js';

/**
 * What a one-time code is for. A code of one purpose never works for another: every statement
 * below names the purpose (docs/api.md#one-time-codes). Stored in `verification_codes.purpose`
 * (migration 005).
 */
export type CodePurpose = 'verification' | 'password_reset' | 'email_change';

/** A live (unconsumed, unsuperseded, unexpired) code row. */
export interface OneTimeCodeRow {
  id: string;
  user_id: string;
  email: string;
  code_hash: string;
  attempts: number;
  expires_at: Date;
}

/**
 * Inserts a new code of `purpose` for the user, bound to (and sent to) `email`, stored as its
 * HMAC, and supersedes every older live code of the user for that purpose (a new code supersedes
 * older ones, docs/api.md#one-time-codes). The insert is guarded: it reads the user row
 * (`FOR KEY SHARE`, so a deletion waits for this transaction or wins before it) and inserts
 * nothing when the user was deleted, or its address is no longer `userEmail` (null: the user has
 * none), since the caller looked it up. A verification or reset code goes to the user's own
 * address (`email` = `userEmail`); an email-change code to the new one.
 * @returns undefined when there is no such user any more (nothing changed); else the address of
 *   every code it superseded (their queued emails are now worthless).
 */
export async function replaceCode(
  q: Queryable,
  c: { id: string; purpose: CodePurpose; userId: string; userEmail: string | null; email: string; codeHash: string; now: Date; expiresAt: Date },
): Promise<string[] | undefined> {
  const { rowCount } = await q.query(
    `INSERT INTO verification_codes (id, purpose, user_id, email, code_hash, created_at, expires_at)
     SELECT $1::uuid, $2::text, id, $4::text, $5::text, $6::timestamptz, $7::timestamptz
       FROM users WHERE id = $3::uuid AND email IS NOT DISTINCT FROM $8::text FOR KEY SHARE`,
    [c.id, c.purpose, c.userId, c.email, c.codeHash, c.now, c.expiresAt, c.userEmail],
  );
  if (rowCount !== 1) return undefined;
  return supersedeCodes(q, { purpose: c.purpose, userId: c.userId, now: c.now, except: c.id });
}

/**
 * Ends every live code of the user for `purpose` (marks them superseded), but `except`: a
 * password change kills the outstanding reset codes, a new code its older siblings.
 * @returns the address of every code it ended, one entry per code (empty when none).
 */
export async function supersedeCodes(
  q: Queryable,
  c: { purpose: CodePurpose; userId: string; now: Date; except?: string | undefined },
): Promise<string[]> {
  const { rows } = await q.query<{ email: string }>(
    `UPDATE verification_codes SET superseded_at = $3
      WHERE user_id = $1 AND purpose = $2 AND consumed_at IS NULL AND superseded_at IS NULL AND ($4::uuid IS NULL OR id <> $4::uuid)
      RETURNING email`,
    [c.userId, c.purpose, c.now, c.except ?? null],
  );
  return rows.map((r) => r.email);
}

/**
 * The user's latest live (unconsumed, unsuperseded, unexpired at `now`) code of `purpose` for
 * `email` (null: whatever its address, as for an email change, whose confirmation names no
 * address), locked `FOR UPDATE` until the transaction ends, so that attempts on one code
 * serialise: a second submission waits and then sees the first one's outcome (a consumed code
 * is no longer live). Undefined when there is none.
 */
export async function lockLiveCode(
  q: Queryable,
  c: { purpose: CodePurpose; userId: string; email: string | null; now: Date },
): Promise<OneTimeCodeRow | undefined> {
  const { rows } = await q.query<OneTimeCodeRow>(
    `SELECT id, user_id, email, code_hash, attempts, expires_at FROM verification_codes
      WHERE user_id = $1 AND purpose = $2 AND ($3::text IS NULL OR email = $3::text) AND consumed_at IS NULL AND superseded_at IS NULL AND expires_at > $4
      ORDER BY created_at DESC LIMIT 1
      FOR UPDATE`,
    [c.userId, c.purpose, c.email, c.now],
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
 * from the losers. A code that was superseded or expired meanwhile is not
 * consumed.
 * @returns true for the one caller that consumed it.
 */
export async function consumeCode(q: Queryable, codeId: string, now: Date): Promise<boolean> {
  const { rowCount } = await q.query(
    'UPDATE verification_codes SET consumed_at = $2 WHERE id = $1 AND consumed_at IS NULL AND superseded_at IS NULL AND expires_at > $2',
    [codeId, now],
  );
  return rowCount === 1;
}
