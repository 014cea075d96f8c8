import type { Queryable } from '../../db/db.js';
import { openSuccessor, sealSuccessor } from '../../crypto/successor-seal.js';
import { constantTimeEqual, sha256 } from '../../crypto/secrets.js';
import { findSuccessor, type LockedRefreshToken } from './refresh-tokens.repo.js';

/**
 * The refresh grace window of docs/api.md#reuse-grace-window (`REFRESH_REUSE_GRACE_SECONDS` > 0).
 *
 * Two tabs that refresh with one token at once must both end with the same single live token,
 * so the immediate parent of the live token, presented within the window, gets that live token
 * back. Anything else (an older token, the parent after the window, a revoked or expired
 * family, a live token that moved on) stays reuse under the strict rule of docs/api.md#reuse-detection.
 * With a window of 0 nothing here applies and nothing is sealed.
 */

/** Milliseconds per second, for comparing `rotated_at` with the window in seconds. */
const MS_PER_SECOND = 1000;

/**
 * What to store beside a token being rotated: its successor sealed under the token itself
 * (`sealSuccessor`), or null when the grace window is off (0: the strict rule needs nothing).
 *
 * @param graceSeconds `REFRESH_REUSE_GRACE_SECONDS`, 0 to 300.
 * @param parentToken the presented token that is being rotated.
 * @param successorToken the token that replaces it.
 */
export function successorCiphertextFor(graceSeconds: number, parentToken: string, successorToken: string): string | null {
  return graceSeconds > 0 ? sealSuccessor(parentToken, successorToken) : null;
}

/**
 * Whether `now` is within `graceSeconds` of `rotatedAt` (inclusive at the end). The window is
 * measured from the rotation time, which nothing but the one guarded rotation writes, so
 * presenting the parent again never extends it. A `rotatedAt` slightly after `now` (clocks of
 * several instances a little apart, each racing tab served by another one) counts as inside.
 *
 * @param rotatedAt when the presented token was rotated.
 * @param now the clock's current time.
 * @param graceSeconds window length in seconds; 0 means no window.
 */
export function isWithinGraceWindow(rotatedAt: Date, now: Date, graceSeconds: number): boolean {
  return graceSeconds > 0 && now.getTime() - rotatedAt.getTime() <= graceSeconds * MS_PER_SECOND;
}

/**
 * Decides whether a rotated token presented again is the grace case (docs/api.md#reuse-grace-window), and if
 * so recovers the family's live token for the cookie. All of these must hold:
 * the window is on and `now - rotated_at <= graceSeconds`; the family (session) is live
 * (`family_live`: neither revoked nor within a second of its end); the presented token's direct child is the live (unrotated) token; and
 * the sealed successor opens with the presented token and hashes to that child.
 *
 * Must run in the refresh transaction after `lockRefreshToken` locked `token` and its
 * session row (`FOR UPDATE`): every rotation of the family needs a lock on that row too (the
 * key-share lock of its successor's foreign key, which `FOR UPDATE` excludes), so no rotation of
 * the child commits between this check and the commit. Reads only; it never creates or changes a token.
 *
 * @param q the refresh transaction.
 * @param token the locked row of the presented token; must be rotated.
 * @param presented the presented token (the parent), the only key to the sealed successor.
 * @returns the live token to answer with (64 base64url characters; 43 for one of format 1 sealed
 *   before the upgrade), or undefined when the strict rule applies and the caller must treat the
 *   presentation as reuse.
 */
export async function liveTokenWithinGrace(
  q: Queryable,
  token: LockedRefreshToken,
  presented: string,
  options: { graceSeconds: number; now: Date },
): Promise<string | undefined> {
  const { graceSeconds, now } = options;
  if (token.rotated_at === null || token.successor_ciphertext === null) return undefined;
  if (!isWithinGraceWindow(token.rotated_at, now, graceSeconds)) return undefined;
  if (!token.family_live) return undefined;
  const child = await findSuccessor(q, token.id);
  // The child was rotated in turn: the presented token is now a grandparent, which is reuse.
  if (child === undefined || child.rotated_at !== null) return undefined;
  const live = openSuccessor(presented, token.successor_ciphertext);
  // Cannot open or does not match the child: altered data; fall back to the strict rule.
  if (live === undefined || !constantTimeEqual(sha256(live), child.token_hash)) return undefined;
  return live;
}
