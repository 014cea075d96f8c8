/**
 * What other modules may use of the `sessions` table (docs/api.md#operations): listing a user's
 * active sessions, finding one with its user, and revoking (each revocation records its
 * `session.revoked` events in the same statement, docs/api.md#event-types), in the caller's
 * transaction `q`. The statements stay in sessions.repo.ts, private to this module.
 */
export {
  findActiveSessionWithUser,
  findSessionOwner,
  listActiveSessions,
  revokeActiveSessions,
  revokeAllSessions,
  revokeSession,
  type RevocationReason,
  type SessionRow,
} from './sessions.repo.js';
