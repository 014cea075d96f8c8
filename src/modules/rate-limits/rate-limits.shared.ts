import type { Queryable } from '../../db/db.js';
import { ACCOUNT_RULE_NAMES } from './rate-limits.rules.js';
import { deleteWindows } from './rate-limits.repo.js';

/**
 * What other modules may use of the rate-limit windows' storage (docs/api.md#rate-limits): the
 * counting statement with a read of the caller's (`hitWindowsAfter`), the account-window join and
 * the forgiving fragment that the sign-in statements embed so that they stay one round trip
 * (docs/performance.md), and the deletion of an account's windows. Everything else goes through
 * the limiter (rate-limits.service.ts), which also plans and judges the counts.
 */
export { forgiveHitsSql, hitWindowsAfter, withCurrentWindowSql, type AccountWindowKey, type HitPlan, type KeyedWindowHit } from './rate-limits.repo.js';

/**
 * Deletes the rate-limit windows counted against the account `userId`, in the caller's
 * transaction `q`: the keys `<rule name>:<user id>` of the rules counted per account
 * ({@link ACCOUNT_RULE_NAMES}; the key of an account rule, `keyOf` in rate-limits.service.ts).
 * One statement.
 * @returns how many rows were deleted.
 */
export function deleteAccountWindows(q: Queryable, userId: string): Promise<number> {
  return deleteWindows(q, ACCOUNT_RULE_NAMES.map((name) => `${name}:${userId}`));
}
