/**
 * What other modules may use to record events (docs/api.md#events-and-webhooks): the event types
 * and their data, {@link recordEvent} and {@link recordEvents} (one INSERT in the caller's
 * transaction), and the fragment {@link eventInsertSql} that statements which must stay one round
 * trip (sign-in, revocations) embed. The statement stays in events.repo.ts.
 */
export {
  EVENT_TYPES,
  eventInsertSql,
  eventTypeLiteral,
  recordEvent,
  recordEvents,
  sessionRevokedCause,
  type EventData,
  type EventType,
  type NewEvent,
  type PasswordChangedVia,
  type SessionRevokedCause,
  type UserDeletedCause,
} from './events.repo.js';
