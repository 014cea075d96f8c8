import type { Queryable } from '../../db/db.js';
import type { User } from '../users/users.schemas.js';

/**
 * Events (docs/api.md#events-and-webhooks): every change an app may care about is recorded as a
 * row of `webhook_events` in the transaction, or the one statement, of the change, so an event
 * exists if and only if its change committed. Recording is one INSERT and nothing else on the
 * request path: the row names the webhook endpoints enabled and subscribed to its type at that
 * moment, read by the same INSERT from the small `webhook_endpoints` table (migration 014), and
 * the delivery worker fans it out later (src/modules/webhooks/delivery.worker.ts).
 *
 * {@link eventInsertSql} is the one place that writes an event: statements that must stay one
 * round trip (sign-in, revocations) embed it as a data-modifying CTE over the rows they change;
 * services that already hold a transaction call {@link recordEvent}, which runs it over the rows
 * of its parameters.
 */

/** Every event type (docs/api.md#event-types), in the table's order. */
export const EVENT_TYPES = [
  'user.created',
  'user.email_verified',
  'user.updated',
  'user.deleted',
  'user.banned',
  'user.unbanned',
  'session.created',
  'session.revoked',
  'refresh_token.reuse_detected',
  'password.changed',
  'mfa.enabled',
  'mfa.disabled',
  'passkey.added',
  'passkey.removed',
  'identity.linked',
  'identity.unlinked',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Why a user was deleted (`user.deleted`): by its owner, by an operator, or because its email was never verified. */
export type UserDeletedCause = 'owner' | 'operator' | 'unverified_expired';
/** Why a session was revoked (`session.revoked`). */
export type SessionRevokedCause = 'logout' | 'revoked_by_user' | 'revoke_all' | 'password_changed' | 'password_reset' | 'refresh_token_reuse' | 'banned' | 'operator';
/** How a password was set (`password.changed`): change-password, a reset, or a first password set by its owner. */
export type PasswordChangedVia = 'change_password' | 'reset' | 'set';

/** The `data` of each event type, exactly (docs/api.md#event-types). */
export interface EventData {
  'user.created': { user: User };
  'user.email_verified': { user: User };
  /** `changed`: the names of the User members that changed. */
  'user.updated': { user: User; changed: (keyof User)[] };
  'user.deleted': { user_id: string; cause: UserDeletedCause };
  /** `banned_until`: RFC 3339, or null for an indefinite ban. */
  'user.banned': { user_id: string; banned_until: string | null; reason: string | null };
  'user.unbanned': { user_id: string };
  'session.created': { user_id: string; session_id: string; amr: string[]; ip: string | null; user_agent: string | null };
  'session.revoked': { user_id: string; session_id: string; cause: SessionRevokedCause };
  /** `ip` and `user_agent` of the request that presented the rotated token. */
  'refresh_token.reuse_detected': { user_id: string; session_id: string; ip: string | null; user_agent: string | null };
  'password.changed': { user_id: string; via: PasswordChangedVia };
  'mfa.enabled': { user_id: string };
  'mfa.disabled': { user_id: string };
  'passkey.added': { user_id: string; passkey_id: string };
  'passkey.removed': { user_id: string; passkey_id: string };
  'identity.linked': { user_id: string; identity_id: string; provider: string };
  'identity.unlinked': { user_id: string; identity_id: string; provider: string };
}

/** An event to record: a type and its data. */
export type NewEvent = { [T in EventType]: { type: T; data: EventData[T] } }[EventType];

/**
 * The `session.revoked` cause of a stored revocation reason (`sessions.revoked_reason`): the
 * stored reasons are the causes, but an operator's revocation is stored as `revoked_by_admin`
 * and is the cause `operator`.
 */
export function sessionRevokedCause(reason: Exclude<SessionRevokedCause, 'operator'> | 'revoked_by_admin'): SessionRevokedCause {
  return reason === 'revoked_by_admin' ? 'operator' : reason;
}

/** An event type as an SQL string literal (the types are fixed identifiers without quotes). */
export function eventTypeLiteral(type: EventType): string {
  if (!EVENT_TYPES.includes(type)) throw new Error(`unknown event type ${String(type)}`);
  return `'${type}'`;
}

/**
 * The INSERT that records one event per row of `from` (a table, a CTE, or a set-returning
 * function with its alias), to embed in a statement as a data-modifying CTE or to run alone:
 * `type` and `data` are SQL expressions over those rows (`data` of type json: its members keep
 * the order written), `at` the SQL of the change's instant (a timestamptz parameter). The id is
 * a UUIDv7 of `at`. The endpoints to fan out to are those enabled and subscribed (`*` or the
 * type) in the statement's snapshot, read from `webhook_endpoints` (a handful of rows; once per
 * statement when `type` is a literal); none: NULL, and the row is in no index but its key's.
 * The SQL is the caller's text, never input.
 */
export function eventInsertSql(e: { from: string; type: string; data: string; at: string }): string {
  const subscribers = `(SELECT array_agg(w.id) FROM webhook_endpoints w
                         WHERE w.enabled AND (w.event_types @> ARRAY['*'] OR w.event_types @> ARRAY[(${e.type})::text]))`;
  return `INSERT INTO webhook_events (id, type, data, occurred_at, pending_endpoint_ids)
          SELECT uuid_v7(${e.at}), ${e.type}, ${e.data}, ${e.at}, ${subscribers} FROM ${e.from}`;
}

/**
 * Records `events` at `now` (when their change happens) in one INSERT ({@link eventInsertSql}
 * over the rows of its parameters). Call it inside the transaction of the change, so the events
 * commit with it or not at all. Nothing happens for an empty list.
 */
export async function recordEvents(q: Queryable, events: readonly NewEvent[], now: Date): Promise<void> {
  if (events.length === 0) return;
  await q.query(eventInsertSql({ from: 'unnest($1::text[], $2::json[]) AS e(type, data)', type: 'e.type', data: 'e.data', at: '$3::timestamptz' }), [
    events.map((e) => e.type),
    events.map((e) => JSON.stringify(e.data)),
    now,
  ]);
}

/** {@link recordEvents} of one event. */
export function recordEvent(q: Queryable, event: NewEvent, now: Date): Promise<void> {
  return recordEvents(q, [event], now);
}
