/**
 * What other modules may use of the `users` table: the functions below run one statement each
 * (rows, locks and updates, in the caller's transaction `q`), and the fragments
 * ({@link USER_COLUMNS}, {@link SIGN_IN_USER_COLUMNS}, {@link banInForceSql},
 * {@link signInUsersByIdentifiersSql}) let the sign-in,
 * refresh and /me statements of other modules read a user in the same round trip
 * (docs/performance.md). The statements stay in users.repo.ts, private to this module; a ban
 * with its revocations is `banUser` of users.service.ts.
 */
export {
  banInForce,
  banInForceSql,
  findSignInUser,
  findTakenIdentifier,
  findUserBan,
  findUserByEmail,
  findUserById,
  findUserByUsername,
  insertUser,
  lockUser,
  lockUserRow,
  markEmailVerified,
  replaceEmail,
  setPasswordHash,
  unbanUser,
  upgradePasswordHash,
  USER_COLUMNS,
  signInUsersByIdentifiersSql,
  SIGN_IN_USER_COLUMNS,
  type BanState,
  type SignInUser,
  type UserRow,
} from './users.repo.js';
