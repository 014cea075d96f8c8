import type { Queryable } from '../../db/db.js';

/** A user's TOTP authenticator as stored (migration 008). */
export interface TotpRow {
  user_id: string;
  /** AES-256-GCM ciphertext of the base32 secret (src/crypto/sealed-secret.ts). */
  secret: string;
  /** null: set up, not turned on. */
  enabled_at: Date | null;
}

/** The user's TOTP authenticator, or undefined when it has none. `lock`: `FOR UPDATE` until the transaction ends. */
export async function findTotp(q: Queryable, userId: string, options: { lock?: boolean } = {}): Promise<TotpRow | undefined> {
  const { rows } = await q.query<TotpRow>(
    `SELECT user_id, secret, enabled_at FROM mfa_totp WHERE user_id = $1${options.lock === true ? ' FOR UPDATE' : ''}`,
    [userId],
  );
  return rows[0];
}

/**
 * Stores a new, not yet enabled secret for the user, replacing an earlier setup that was never
 * enabled; an enabled authenticator is left as it is.
 * @returns false when the user's TOTP is already enabled (nothing changed).
 */
export async function storePendingTotp(q: Queryable, c: { userId: string; secret: string; now: Date }): Promise<boolean> {
  const { rowCount } = await q.query(
    `INSERT INTO mfa_totp (user_id, secret, enabled_at, last_step, created_at) VALUES ($1, $2, NULL, NULL, $3)
     ON CONFLICT (user_id) DO UPDATE SET secret = EXCLUDED.secret, last_step = NULL, created_at = EXCLUDED.created_at
      WHERE mfa_totp.enabled_at IS NULL`,
    [c.userId, c.secret, c.now],
  );
  return rowCount === 1;
}

/**
 * Accepts time step `step` for the user, once: one guarded UPDATE raises `last_step` only when
 * `step` is above it (RFC 6238 §5.2: an OTP accepted once is never accepted again), so of two
 * requests with one code, on one instance or two, exactly one gets true. `enabled`: the
 * authenticator must be enabled (sign-in, disable) or not yet (enable).
 * @returns true for the one caller that accepted the step.
 */
export async function acceptTotpStep(q: Queryable, c: { userId: string; step: number; enabled: boolean }): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE mfa_totp SET last_step = $2
      WHERE user_id = $1 AND (last_step IS NULL OR last_step < $2) AND (enabled_at IS NOT NULL) = $3`,
    [c.userId, c.step, c.enabled],
  );
  return rowCount === 1;
}

/** Turns the user's pending TOTP on. @returns false when there was none pending. */
export async function enableTotp(q: Queryable, userId: string, now: Date): Promise<boolean> {
  const { rowCount } = await q.query('UPDATE mfa_totp SET enabled_at = $2 WHERE user_id = $1 AND enabled_at IS NULL', [userId, now]);
  return rowCount === 1;
}

/** Deletes the user's TOTP authenticator and recovery codes. @returns false when it had none. */
export async function deleteTotp(q: Queryable, userId: string): Promise<boolean> {
  await q.query('DELETE FROM mfa_recovery_codes WHERE user_id = $1', [userId]);
  const { rowCount } = await q.query('DELETE FROM mfa_totp WHERE user_id = $1', [userId]);
  return rowCount === 1;
}

/** Replaces the user's recovery codes with `hashes` (the old set dies). */
export async function replaceRecoveryCodes(q: Queryable, c: { userId: string; hashes: readonly string[]; now: Date }): Promise<void> {
  await q.query('DELETE FROM mfa_recovery_codes WHERE user_id = $1', [c.userId]);
  await q.query(
    `INSERT INTO mfa_recovery_codes (id, user_id, code_hash, created_at)
     SELECT gen_random_uuid(), $1, h, $3 FROM unnest($2::text[]) AS h`,
    [c.userId, [...c.hashes], c.now],
  );
}

/** Uses a recovery code once: one guarded UPDATE. @returns true for the one caller that used it. */
export async function useRecoveryCode(q: Queryable, c: { userId: string; hash: string; now: Date }): Promise<boolean> {
  const { rowCount } = await q.query(
    'UPDATE mfa_recovery_codes SET used_at = $3 WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL',
    [c.userId, c.hash, c.now],
  );
  return rowCount === 1;
}
