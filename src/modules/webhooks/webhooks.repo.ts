import { uuidV7Floor } from '../../crypto/ids.js';
import type { Queryable } from '../../db/db.js';

/**
 * The statements of webhook endpoints and deliveries (migration 014, docs/api.md#events-and-webhooks).
 * Events are written by src/modules/events/events.repo.ts; this file fans them out and keeps the
 * deliveries: claimed under a lease as the email outbox's rows are (`FOR UPDATE SKIP LOCKED`),
 * each outcome recorded only by the lease holder.
 */

/** A stored endpoint; `secret` and `previous_secret` are sealed (src/crypto/sealed-secret.ts). */
export interface EndpointRow {
  id: string;
  url: string;
  event_types: string[];
  enabled: boolean;
  /** Why it is disabled: `operator`, or `gone` (a 410); null while enabled. */
  disabled_reason: string | null;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
}

const ENDPOINT_COLUMNS = 'id, url, event_types, enabled, disabled_reason, secret, previous_secret, previous_secret_expires_at, created_at';

/** A delivery's status. */
export type DeliveryStatus = 'pending' | 'delivered' | 'dead';

/** A stored delivery, as the wire Delivery shows it. */
export interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  last_attempt_at: Date | null;
  last_status: number | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  created_at: Date;
}

const DELIVERY_COLUMNS = 'id, event_id, endpoint_id, event_type, status, attempts, last_attempt_at, last_status, last_error, next_attempt_at, created_at';

/** Stores a new endpoint (enabled) with its sealed secret. */
export async function insertEndpoint(q: Queryable, e: { id: string; url: string; eventTypes: readonly string[]; secret: string; now: Date }): Promise<EndpointRow> {
  const { rows } = await q.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (id, url, event_types, enabled, secret, created_at, updated_at) VALUES ($1, $2, $3, true, $4, $5, $5)
     RETURNING ${ENDPOINT_COLUMNS}`,
    [e.id, e.url, [...e.eventTypes], e.secret, e.now],
  );
  return rows[0]!;
}

/** Every endpoint, oldest first. */
export async function listEndpoints(q: Queryable): Promise<EndpointRow[]> {
  const { rows } = await q.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY created_at, id`);
  return rows;
}

/** The endpoint `id`, locked `FOR UPDATE` until the transaction ends with `lock`; undefined when there is none. */
export async function findEndpoint(q: Queryable, id: string, options: { lock?: boolean } = {}): Promise<EndpointRow | undefined> {
  const { rows } = await q.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1${options.lock === true ? ' FOR UPDATE' : ''}`, [id]);
  return rows[0];
}

/**
 * Changes an endpoint's URL, event types and enabled state (each left as it is when undefined).
 * Disabling holds its pending deliveries (they wait, out of the worker's claim) and records
 * `disabledReason`; enabling releases them, each due at its own `next_attempt_at`. Run it in
 * the transaction that locked the endpoint ({@link findEndpoint} with `lock`).
 * @returns the endpoint as it is now, or undefined when there is none.
 */
export async function updateEndpoint(
  q: Queryable,
  id: string,
  change: { url?: string | undefined; eventTypes?: readonly string[] | undefined; enabled?: boolean | undefined; disabledReason?: string },
  now: Date,
): Promise<EndpointRow | undefined> {
  const { rows } = await q.query<EndpointRow>(
    `UPDATE webhook_endpoints
        SET url = COALESCE($2, url), event_types = COALESCE($3::text[], event_types), enabled = COALESCE($4, enabled),
            disabled_reason = CASE WHEN COALESCE($4, enabled) THEN NULL WHEN $4 = false THEN COALESCE($5, 'operator') ELSE disabled_reason END,
            updated_at = $6
      WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
    [id, change.url ?? null, change.eventTypes === undefined ? null : [...change.eventTypes], change.enabled ?? null, change.disabledReason ?? null, now],
  );
  const row = rows[0];
  if (row !== undefined && change.enabled !== undefined) await holdPendingDeliveries(q, id, !change.enabled);
  return row;
}

/** Holds (`held`: true) or releases the pending deliveries of an endpoint (`webhook_deliveries_endpoint_status_idx`). */
async function holdPendingDeliveries(q: Queryable, endpointId: string, held: boolean): Promise<void> {
  await q.query(`UPDATE webhook_deliveries SET held = $2 WHERE endpoint_id = $1 AND status = 'pending' AND held <> $2`, [endpointId, held]);
}

/**
 * Deletes an endpoint and, with it (ON DELETE CASCADE), every delivery to it: the pending ones
 * are dropped, never attempted again.
 * @returns false when there was no such endpoint.
 */
export async function deleteEndpoint(q: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
  return rowCount === 1;
}

/**
 * Replaces an endpoint's secret with `secret` (sealed): the one it replaces becomes the previous
 * secret, which still signs until `previousUntil`; an older previous secret is dropped.
 * @returns false when there is no such endpoint.
 */
export async function rotateEndpointSecret(q: Queryable, id: string, c: { secret: string; previousUntil: Date; now: Date }): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_expires_at = $3, secret = $2, updated_at = $4 WHERE id = $1`,
    [id, c.secret, c.previousUntil, c.now],
  );
  return rowCount === 1;
}

/**
 * An endpoint's deliveries, newest first (by id, a UUIDv7 of `created_at`), of one status or
 * all, after the keyset position `before` (a delivery id: strictly older ones), at most `limit`.
 * Reads `webhook_deliveries_endpoint_status_idx` or `webhook_deliveries_endpoint_idx`.
 */
export async function listDeliveries(
  q: Queryable,
  endpointId: string,
  page: { status?: DeliveryStatus | undefined; before?: string | undefined; limit: number },
): Promise<DeliveryRow[]> {
  const params: unknown[] = [endpointId, page.limit];
  const where = ['endpoint_id = $1'];
  if (page.status !== undefined) where.push(`status = $${params.push(page.status)}`);
  if (page.before !== undefined) where.push(`id < $${params.push(page.before)}`);
  const { rows } = await q.query<DeliveryRow>(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT $2`, params);
  return rows;
}

/**
 * Makes a new attempt of a delivery due at `now`, whatever its status (a delivered or dead one is
 * pending again), with the retry schedule started afresh; it stays held while its endpoint is
 * disabled. An attempt in flight is left to finish and record its outcome.
 * @returns false when the endpoint has no such delivery.
 */
export async function retryDelivery(q: Queryable, endpointId: string, deliveryId: string, now: Date): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE webhook_deliveries d
        SET status = 'pending', next_attempt_at = $3, schedule_attempts = 0, held = NOT w.enabled
       FROM webhook_endpoints w
      WHERE d.id = $2 AND d.endpoint_id = $1 AND w.id = d.endpoint_id`,
    [endpointId, deliveryId, now],
  );
  return rowCount === 1;
}

/**
 * Fans out up to `limit` events not yet fanned out, oldest first, in one statement: one pending
 * delivery, due at `now`, per endpoint the event names that still exists and is enabled (a
 * disabled one gets none), and the events marked done. Events are taken `FOR UPDATE SKIP
 * LOCKED`, so several workers fan out disjoint events, and the endpoints `FOR SHARE`, so an
 * endpoint being disabled right now is either seen disabled or holds the new delivery when it
 * commits. The unique (event, endpoint) pair makes a repeated fan-out create nothing.
 * @returns how many events were fanned out.
 */
export async function fanOutEvents(q: Queryable, c: { now: Date; limit: number }): Promise<number> {
  const { rows } = await q.query<{ events: number }>(
    `WITH claimed AS MATERIALIZED (
       SELECT id, type, pending_endpoint_ids FROM webhook_events
        WHERE pending_endpoint_ids IS NOT NULL
        ORDER BY id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
     ), done AS (
       UPDATE webhook_events e SET pending_endpoint_ids = NULL FROM claimed c WHERE e.id = c.id RETURNING e.id
     ), targets AS (
       SELECT w.id FROM webhook_endpoints w
        WHERE w.enabled AND w.id IN (SELECT unnest(pending_endpoint_ids) FROM claimed)
        FOR SHARE
     ), inserted AS (
       INSERT INTO webhook_deliveries (id, event_id, endpoint_id, event_type, status, next_attempt_at, created_at)
       SELECT uuid_v7($1), c.id, t.id, c.type, 'pending', $1, $1
         FROM claimed c JOIN targets t ON t.id = ANY (c.pending_endpoint_ids)
       ON CONFLICT (event_id, endpoint_id) DO NOTHING
     )
     SELECT count(*)::int AS events FROM done`,
    [c.now, c.limit],
  );
  return rows[0]?.events ?? 0;
}

/** A delivery claimed for an attempt, with its event and its endpoint's URL and sealed secrets. */
export interface ClaimedDelivery {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  /** The event's data, parsed from its stored JSON text (members in their recorded order). */
  data: unknown;
  occurred_at: Date;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  attempts: number;
  schedule_attempts: number;
}

/**
 * Claims up to `limit` due deliveries for `owner` until `leaseUntil`, oldest due first, and
 * reads what their attempts need, in one statement. Only `webhook_deliveries_due_idx` is read:
 * pending, not held, due (a delivery whose lease ran out, its worker gone, is due again).
 * `FOR UPDATE SKIP LOCKED` lets several workers claim at once without waiting or double-claiming.
 */
export async function claimDueDeliveries(q: Queryable, c: { owner: string; now: Date; leaseUntil: Date; limit: number }): Promise<ClaimedDelivery[]> {
  const { rows } = await q.query<ClaimedDelivery>(
    `WITH claimed AS (
       UPDATE webhook_deliveries SET lease_owner = $2, lease_expires_at = $3
        WHERE id IN (
          SELECT id FROM webhook_deliveries
           WHERE status = 'pending' AND NOT held AND next_attempt_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
           ORDER BY next_attempt_at
           LIMIT $4
           FOR UPDATE SKIP LOCKED)
       RETURNING id, endpoint_id, event_id, event_type, attempts, schedule_attempts
     )
     SELECT c.id, c.endpoint_id, c.event_id, c.event_type, e.data, e.occurred_at, w.url, w.secret, w.previous_secret, w.previous_secret_expires_at,
            c.attempts, c.schedule_attempts
       FROM claimed c JOIN webhook_events e ON e.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id`,
    [c.now, c.owner, c.leaseUntil, c.limit],
  );
  return rows;
}

/** What an attempt ended with, for {@link recordAttempt}. */
export type AttemptRecord =
  | { readonly outcome: 'delivered'; readonly at: Date; readonly status: number }
  | { readonly outcome: 'retry'; readonly at: Date; readonly status: number | null; readonly error: string | null; readonly nextAttemptAt: Date }
  | { readonly outcome: 'dead'; readonly at: Date; readonly status: number | null; readonly error: string | null };

/**
 * Records an attempt of a delivery that `owner` leased: `attempts + 1`, when it was made and what
 * it got (`last_status`, `last_error`), and the delivery delivered, pending again at
 * `nextAttemptAt` (`schedule_attempts + 1`), or dead; the lease is released.
 * @returns false when `owner` no longer holds the lease (nothing changed).
 */
export async function recordAttempt(q: Queryable, id: string, owner: string, a: AttemptRecord): Promise<boolean> {
  const status = a.outcome === 'retry' ? 'pending' : a.outcome;
  const { rowCount } = await q.query(
    `UPDATE webhook_deliveries
        SET status = $3, attempts = attempts + 1, schedule_attempts = schedule_attempts + CASE WHEN $3 = 'pending' THEN 1 ELSE 0 END,
            last_attempt_at = $4, last_status = $5, last_error = $6, next_attempt_at = $7, lease_owner = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_owner = $2`,
    [id, owner, status, a.at, a.status, a.outcome === 'delivered' ? null : a.error, a.outcome === 'retry' ? a.nextAttemptAt : null],
  );
  return rowCount === 1;
}

/**
 * Disables an endpoint whose receiver answered 410 Gone (`disabled_reason` `gone`) and holds its
 * pending deliveries. Run it in the transaction that records the attempt.
 */
export async function disableGoneEndpoint(q: Queryable, endpointId: string, now: Date): Promise<void> {
  await updateEndpoint(q, endpointId, { enabled: false, disabledReason: 'gone' }, now);
}

/**
 * Releases every lease held by `owner` (graceful shutdown), so another worker can claim at once.
 * Only pending rows are leased, so only those are searched.
 */
export async function releaseDeliveryLeases(q: Queryable, owner: string): Promise<void> {
  await q.query(`UPDATE webhook_deliveries SET lease_owner = NULL, lease_expires_at = NULL WHERE status = 'pending' AND NOT held AND lease_owner = $1`, [owner]);
}

/**
 * How many deliveries are pending (deliverable: their endpoint enabled) and how many are dead
 * (metric `auth_webhook_deliveries`), each through its partial index: the cost follows the
 * backlog, not the table.
 */
export async function countDeliveryBacklog(q: Queryable): Promise<{ pending: number; dead: number }> {
  const { rows } = await q.query<{ pending: number; dead: number }>(
    `SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND NOT held)::int AS pending,
            (SELECT count(*) FROM webhook_deliveries WHERE status = 'dead')::int AS dead`,
  );
  return rows[0] ?? { pending: 0, dead: 0 };
}

/** When the oldest deliverable pending delivery was created, or null when none is (metric `auth_webhook_oldest_pending_age_seconds`). */
export async function oldestPendingDeliveryCreatedAt(q: Queryable): Promise<Date | null> {
  const { rows } = await q.query<{ oldest: Date | null }>(`SELECT min(created_at) AS oldest FROM webhook_deliveries WHERE status = 'pending' AND NOT held`);
  return rows[0]?.oldest ?? null;
}

/**
 * Deletes up to `limit` deliveries of `status` (delivered or dead) created before `before`, oldest
 * first, by a range of the primary key (a UUIDv7 of `created_at`); `FOR UPDATE SKIP LOCKED`, by
 * physical address, as every retention purge (src/modules/retention/retention.repo.ts).
 * @returns how many were deleted.
 */
export async function purgeFinishedDeliveries(q: Queryable, c: { status: 'delivered' | 'dead'; before: Date; limit: number }): Promise<number> {
  const { rowCount } = await q.query(
    `DELETE FROM webhook_deliveries WHERE ctid = ANY(ARRAY(
       SELECT ctid FROM webhook_deliveries
        WHERE id < $1 AND status = $3
        ORDER BY id
        LIMIT $2
        FOR UPDATE SKIP LOCKED))`,
    [uuidV7Floor(c.before), c.limit, c.status],
  );
  return rowCount;
}

/**
 * Deletes up to `limit` events that occurred before `before`, were fanned out, and have no
 * delivery left (a pending or dead one keeps its event), oldest first, by a range of the primary
 * key (a UUIDv7 of `occurred_at`); the "no delivery" check reads the (event, endpoint) unique index.
 * @returns how many were deleted.
 */
export async function purgeEvents(q: Queryable, c: { before: Date; limit: number }): Promise<number> {
  const { rowCount } = await q.query(
    `DELETE FROM webhook_events WHERE ctid = ANY(ARRAY(
       SELECT e.ctid FROM webhook_events e
        WHERE e.id < $1 AND e.pending_endpoint_ids IS NULL
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
        ORDER BY e.id
        LIMIT $2
        FOR UPDATE SKIP LOCKED))`,
    [uuidV7Floor(c.before), c.limit],
  );
  return rowCount;
}
