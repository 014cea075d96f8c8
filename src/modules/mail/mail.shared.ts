/**
 * What other modules may use of the email outbox (docs/operations.md): queueing an email and
 * cancelling the pending ones, in the caller's transaction `q` (so an email is queued or
 * cancelled if and only if its change commits), and the backlog figures the metrics read. The
 * statements stay in outbox.repo.ts, private to this module.
 */
export {
  cancelEmailsTo,
  cancelPendingEmails,
  countOutboxBacklog,
  enqueueEmail,
  oldestPendingEmailCreatedAt,
  type CodeEmailKind,
  type OutboxKind,
} from './outbox.repo.js';
