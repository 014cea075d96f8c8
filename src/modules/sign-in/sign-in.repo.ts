import type { Queryable } from '../../db/db.js';
import { hitWindowsAfter, withCurrentWindowSql, type AccountWindowKey, type HitPlan, type KeyedWindowHit } from '../rate-limits/rate-limits.shared.js';
import type { AccountWindow, FallbackWindow } from '../rate-limits/rate-limits.service.js';
import { signInUsersByIdentifiersSql, type SignInUser } from '../users/users.shared.js';
import { passkeyWithOwnerSql, type PasskeyWithOwner } from '../passkeys/passkeys.shared.js';

/**
 * The statements of a sign-in (docs/api.md#sign-in): the attempt counted and its user found in
 * one round trip, for a password and for a passkey, and the challenges of the second step
 * (`mfa_challenges`, docs/api.md#sign-in-second-step). The session itself is created by the
 * sessions module (`SessionsService.createSession`).
 */

/**
 * Counts a password sign-in's attempt (`plan`: the client, then each identifier from it) and finds
 * every user the (normalised) identifiers name, each with its account's current failures
 * (`account`), plus the current window of `unknownAccountKey` (the failures of identifiers that
 * name no account) on every row, in one statement (one round trip, one commit;
 * docs/performance.md). An identifier left undefined matches nobody. The read sees the database
 * as it was before the counts.
 * @returns the counted windows (for RateLimiter.judge) and the rows: at least one, whose user
 *   columns are null when no identifier names a user.
 */
export function countSignInAndFindUsers(
  q: Queryable,
  c: {
    plan: HitPlan;
    account: AccountWindowKey;
    unknownAccountKey: string;
    ids: { username?: string | undefined; email?: string | undefined; phone?: string | undefined };
  },
): Promise<{ windows: KeyedWindowHit[]; rows: Array<Partial<SignInUser> & AccountWindow & FallbackWindow> }> {
  return hitWindowsAfter<Partial<SignInUser> & AccountWindow & FallbackWindow>(q, c.plan, (p) =>
    withCurrentWindowSql(p, signInUsersByIdentifiersSql(p, c.ids), c.account, c.unknownAccountKey),
  );
}

/**
 * Counts a passkey sign-in's attempt (`plan`: the client) and finds the credential `credentialId`
 * with its owner as a sign-in checks it and the account's current failures (`account`), in one
 * statement, as {@link countSignInAndFindUsers} does for a password.
 * @returns the counted windows and the credential's row, when there is one.
 */
export async function countSignInAndFindPasskey(
  q: Queryable,
  c: { plan: HitPlan; account: AccountWindowKey; credentialId: string },
): Promise<{ windows: KeyedWindowHit[]; owner: (PasskeyWithOwner & AccountWindow) | undefined }> {
  const { windows, rows } = await hitWindowsAfter<PasskeyWithOwner & AccountWindow>(q, c.plan, (p) =>
    withCurrentWindowSql(p, passkeyWithOwnerSql(p, c.credentialId), c.account),
  );
  return { windows, owner: rows[0] };
}

/** A sign-in challenge (the `mfa_challenge` cookie's row), locked. */
export interface ChallengeRow {
  id: string;
  user_id: string;
  /** The `password_version` whose hash the password step checked (or that the user had at a provider's sign-in). */
  password_version: number;
  /** The `amr` of the first step (RFC 8176): `["pwd"]`, or `["oauth"]`; the session adds `otp`. */
  amr: string[];
  attempts: number;
  expires_at: Date;
  consumed_at: Date | null;
}

/** Stores a sign-in challenge by the SHA-256 of its cookie value, with the `amr` of its first step. */
export async function insertChallenge(
  q: Queryable,
  c: { id: string; tokenHash: string; userId: string; passwordVersion: number; passwordHash: string | null; amr: readonly string[]; now: Date; expiresAt: Date },
): Promise<void> {
  // The hash is still stored for an instance of the previous version (migration 011), which compares it.
  await q.query(
    `INSERT INTO mfa_challenges (id, token_hash, user_id, password_version, password_hash, amr, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [c.id, c.tokenHash, c.userId, c.passwordVersion, c.passwordHash, [...c.amr], c.now, c.expiresAt],
  );
}

/** The challenge with this cookie hash, locked `FOR UPDATE` (its tries serialise); undefined when there is none. */
export async function lockChallenge(q: Queryable, tokenHash: string): Promise<ChallengeRow | undefined> {
  const { rows } = await q.query<ChallengeRow>(
    'SELECT id, user_id, password_version, amr, attempts, expires_at, consumed_at FROM mfa_challenges WHERE token_hash = $1 FOR UPDATE',
    [tokenHash],
  );
  return rows[0];
}

/** Counts a wrong code against a challenge. @returns the attempts so far. */
export async function recordChallengeFailure(q: Queryable, id: string): Promise<number> {
  const { rows } = await q.query<{ attempts: number }>('UPDATE mfa_challenges SET attempts = attempts + 1 WHERE id = $1 RETURNING attempts', [id]);
  return rows[0]?.attempts ?? Number.MAX_SAFE_INTEGER;
}

/** Marks a challenge used. */
export async function consumeChallenge(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query('UPDATE mfa_challenges SET consumed_at = $2 WHERE id = $1', [id, now]);
}
