import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { decodeCanonicalBase64url } from '../../crypto/secrets.js';
import { sealSecret } from '../../crypto/sealed-secret.js';
import { EVENT_TYPES } from '../events/events.shared.js';
import { UUID_PATTERN } from '../tokens/access-token.service.js';
import { endpointUrlProblem, normalizeEndpointUrl } from './destination.js';
import { newWebhookSecret } from './webhook-signature.js';
import {
  deleteEndpoint,
  findEndpoint,
  insertEndpoint,
  listDeliveries,
  listEndpoints,
  retryDelivery,
  rotateEndpointSecret,
  updateEndpoint,
  type DeliveryStatus,
  type EndpointRow,
} from './webhooks.repo.js';
import { DEFAULT_DELIVERIES_LIMIT, DELIVERY_STATUSES, MAX_DELIVERIES_LIMIT, toDelivery, toEndpoint, type Delivery, type Endpoint } from './webhooks.schemas.js';

/**
 * Webhook endpoint management (docs/api.md#events-and-webhooks): one implementation behind the
 * admin API's `/admin/v0/webhooks` routes and the CLI's `latchkey webhooks`. Each change runs in
 * one transaction, and calls the caller's `audit` inside it, so an audit entry commits with its
 * change or not at all.
 */

/** How long the replaced secret still signs after a rotation: 24 hours (docs/api.md#webhook-signature). */
export const PREVIOUS_SECRET_HOURS = 24;
const MS_PER_HOUR = 60 * 60 * 1000;

/** A request the service refuses: bad input (`validation_failed`, 400) or an unknown webhook or delivery (`not_found`, 404). */
export class WebhookRequestError extends Error {
  override readonly name = 'WebhookRequestError';
  constructor(
    readonly reason: 'validation_failed' | 'not_found',
    message: string,
  ) {
    super(message);
  }
}

/**
 * A change, for the caller's audit trail: the admin API's audit action, the endpoint, and what
 * changed (never a secret).
 */
export interface WebhookChange {
  readonly action: 'webhook.create' | 'webhook.update' | 'webhook.delete' | 'webhook.rotate_secret' | 'delivery.retry';
  readonly webhookId: string;
  readonly details: Readonly<Record<string, unknown>>;
}

/** What every change accepts: `audit`, run inside the change's transaction after the change (an admin API route writes its audit entry there). */
export interface ChangeOptions {
  readonly audit?: ((tx: Queryable, change: WebhookChange) => Promise<void>) | undefined;
}

/** A page of deliveries, newest first; `next_cursor` is null exactly when no delivery follows. */
export interface DeliveriesPage {
  readonly deliveries: Delivery[];
  readonly next_cursor: string | null;
}

/** Webhook endpoint management. */
export interface WebhooksService {
  /**
   * Adds an endpoint, enabled, with a new secret (shown only here and at rotation).
   * @throws WebhookRequestError `validation_failed` for a URL or event types the rules refuse.
   */
  add(input: { url: string; eventTypes: readonly string[] }, options?: ChangeOptions): Promise<{ webhook: Endpoint; secret: string }>;
  /** Every endpoint, oldest first. */
  list(): Promise<Endpoint[]>;
  /** One endpoint. @throws WebhookRequestError `validation_failed` (not a UUID), `not_found`. */
  get(webhookId: string): Promise<Endpoint>;
  /**
   * Changes an endpoint's URL, event types or enabled state. Disabled, its pending deliveries
   * wait and no delivery is created for it; enabled again, they are due as scheduled (the events
   * it missed meanwhile are not brought back). A request that changes nothing is not audited.
   * @throws WebhookRequestError `validation_failed`, `not_found`.
   */
  update(webhookId: string, input: { url?: string | undefined; eventTypes?: readonly string[] | undefined; enabled?: boolean | undefined }, options?: ChangeOptions): Promise<Endpoint>;
  /** Removes an endpoint with every delivery to it (its pending deliveries are dropped). @throws WebhookRequestError `validation_failed`, `not_found`. */
  remove(webhookId: string, options?: ChangeOptions): Promise<void>;
  /**
   * Gives an endpoint a new secret; the one it replaces signs too for {@link PREVIOUS_SECRET_HOURS}
   * hours (a second rotation meanwhile drops the oldest).
   * @returns the new secret, shown only here.
   * @throws WebhookRequestError `validation_failed`, `not_found`.
   */
  rotateSecret(webhookId: string, options?: ChangeOptions): Promise<{ secret: string }>;
  /**
   * An endpoint's deliveries, newest first, optionally of one status, `limit` 1 to 200 (default
   * 50) from the position of `cursor` (a `next_cursor` of an earlier page).
   * @throws WebhookRequestError `validation_failed` (bad status, limit or cursor), `not_found`.
   */
  listDeliveries(webhookId: string, query: { status?: string | undefined; limit?: string | number | undefined; cursor?: string | undefined }): Promise<DeliveriesPage>;
  /**
   * Makes a new attempt of a delivery due now, whatever its status (a dead one is pending again).
   * @throws WebhookRequestError `validation_failed`, `not_found` (the webhook, or a delivery not of it).
   */
  retryDelivery(webhookId: string, deliveryId: string, options?: ChangeOptions): Promise<void>;
}

/** Dependencies of {@link createWebhooksService}. */
export interface WebhooksDeps {
  readonly db: Db;
  readonly clock: Clock;
  /** The AES-256-GCM key of secrets at rest (KeyStore.webhookSecretKey, `loadWebhookSecretKey`). */
  readonly secretKey: Buffer;
}

/** `event_types` as the rules want them: `["*"]` alone or distinct known types. @throws WebhookRequestError */
function checkedEventTypes(eventTypes: readonly string[]): string[] {
  const known = new Set<string>(EVENT_TYPES);
  if (eventTypes.length === 0) throw new WebhookRequestError('validation_failed', 'event_types must not be empty');
  if (eventTypes.includes('*')) {
    if (eventTypes.length > 1) throw new WebhookRequestError('validation_failed', 'event_types must be ["*"] alone, or a list of event types');
    return ['*'];
  }
  const unknown = eventTypes.find((t) => !known.has(t));
  if (unknown !== undefined) throw new WebhookRequestError('validation_failed', `event_types: "${unknown}" is not an event type`);
  if (new Set(eventTypes).size !== eventTypes.length) throw new WebhookRequestError('validation_failed', 'event_types must not repeat a type');
  return [...eventTypes];
}

/** A URL as the rules want it, normalised. @throws WebhookRequestError */
function checkedUrl(url: string): string {
  const problem = endpointUrlProblem(url);
  if (problem !== undefined) throw new WebhookRequestError('validation_failed', problem);
  return normalizeEndpointUrl(url);
}

/** @throws WebhookRequestError `validation_failed` when `id` is not a UUID. */
function checkedId(id: string, what: string): string {
  if (!UUID_PATTERN.test(id)) throw new WebhookRequestError('validation_failed', `${what} must be a UUID`);
  return id.toLowerCase();
}

/** The opaque cursor after delivery `id`: the base64url of its 16 bytes. */
function cursorOf(id: string): string {
  return Buffer.from(id.replaceAll('-', ''), 'hex').toString('base64url');
}

/** The delivery id of a cursor made by {@link cursorOf}. @throws WebhookRequestError for any other text. */
function idOfCursor(cursor: string): string {
  const bytes = decodeCanonicalBase64url(cursor);
  if (bytes?.length !== 16) throw new WebhookRequestError('validation_failed', 'cursor is not one this service issued');
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** `limit` 1 to 200 (a number, or its decimal text from a query), default 50. @throws WebhookRequestError */
function checkedLimit(limit: string | number | undefined): number {
  if (limit === undefined) return DEFAULT_DELIVERIES_LIMIT;
  const n = typeof limit === 'number' ? limit : /^[0-9]{1,4}$/.test(limit) ? Number(limit) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_DELIVERIES_LIMIT) throw new WebhookRequestError('validation_failed', `limit must be an integer from 1 to ${MAX_DELIVERIES_LIMIT}`);
  return n;
}

/** Builds the {@link WebhooksService}. */
export function createWebhooksService(deps: WebhooksDeps): WebhooksService {
  const { db, clock, secretKey } = deps;
  const notFound = (): WebhookRequestError => new WebhookRequestError('not_found', 'The webhook does not exist.');

  /**
   * Runs `change` on endpoint `webhookId`, locked, in one transaction, then the audit of what it
   * says changed (none: no audit). @throws WebhookRequestError `validation_failed`, `not_found`
   */
  const onLockedEndpoint = async <T>(
    webhookId: string,
    options: ChangeOptions | undefined,
    change: (tx: Queryable, endpoint: EndpointRow, now: Date) => Promise<{ value: T; audit?: WebhookChange }>,
  ): Promise<T> => {
    const id = checkedId(webhookId, 'webhook_id');
    return db.transaction(async (tx) => {
      const endpoint = await findEndpoint(tx, id, { lock: true });
      if (endpoint === undefined) throw notFound();
      const { value, audit } = await change(tx, endpoint, clock.now());
      if (audit !== undefined) await options?.audit?.(tx, audit);
      return value;
    });
  };

  return {
    async add(input, options) {
      const url = checkedUrl(input.url);
      const eventTypes = checkedEventTypes(input.eventTypes);
      const id = randomUUID();
      const secret = newWebhookSecret();
      const row = await db.transaction(async (tx) => {
        const stored = await insertEndpoint(tx, { id, url, eventTypes, secret: sealSecret(secretKey, id, secret), now: clock.now() });
        await options?.audit?.(tx, { action: 'webhook.create', webhookId: id, details: { webhook_id: id, url, event_types: eventTypes } });
        return stored;
      });
      return { webhook: toEndpoint(row), secret };
    },

    async list() {
      return (await listEndpoints(db)).map(toEndpoint);
    },

    async get(webhookId) {
      const row = await findEndpoint(db, checkedId(webhookId, 'webhook_id'));
      if (row === undefined) throw notFound();
      return toEndpoint(row);
    },

    async update(webhookId, input, options) {
      const url = input.url === undefined ? undefined : checkedUrl(input.url);
      const eventTypes = input.eventTypes === undefined ? undefined : checkedEventTypes(input.eventTypes);
      return onLockedEndpoint(webhookId, options, async (tx, endpoint, now) => {
        const before = toEndpoint(endpoint);
        const after = toEndpoint((await updateEndpoint(tx, before.id, { url, eventTypes, enabled: input.enabled }, now))!);
        const changed = (['url', 'event_types', 'enabled'] as const).filter((name) => JSON.stringify(before[name]) !== JSON.stringify(after[name]));
        if (changed.length === 0) return { value: after };
        const details = Object.fromEntries([['webhook_id', after.id], ['changed', changed], ...changed.map((name) => [name, after[name]])]);
        return { value: after, audit: { action: 'webhook.update', webhookId: after.id, details } };
      });
    },

    async remove(webhookId, options) {
      await onLockedEndpoint(webhookId, options, async (tx, endpoint) => {
        await deleteEndpoint(tx, endpoint.id);
        return { value: undefined, audit: { action: 'webhook.delete', webhookId: endpoint.id, details: { webhook_id: endpoint.id, url: endpoint.url } } };
      });
    },

    async rotateSecret(webhookId, options) {
      const secret = newWebhookSecret();
      await onLockedEndpoint(webhookId, options, async (tx, { id }, now) => {
        await rotateEndpointSecret(tx, id, { secret: sealSecret(secretKey, id, secret), previousUntil: new Date(now.getTime() + PREVIOUS_SECRET_HOURS * MS_PER_HOUR), now });
        return { value: undefined, audit: { action: 'webhook.rotate_secret', webhookId: id, details: { webhook_id: id } } };
      });
      return { secret };
    },

    async listDeliveries(webhookId, query) {
      const id = checkedId(webhookId, 'webhook_id');
      if (query.status !== undefined && !DELIVERY_STATUSES.includes(query.status as DeliveryStatus)) {
        throw new WebhookRequestError('validation_failed', `status must be one of ${DELIVERY_STATUSES.join(', ')}`);
      }
      const limit = checkedLimit(query.limit);
      const before = query.cursor === undefined ? undefined : idOfCursor(query.cursor);
      if ((await findEndpoint(db, id)) === undefined) throw notFound();
      // One more than asked for tells whether a next page exists, without a count.
      const rows = await listDeliveries(db, id, { status: query.status as DeliveryStatus | undefined, before, limit: limit + 1 });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return { deliveries: page.map(toDelivery), next_cursor: rows.length > limit && last !== undefined ? cursorOf(last.id) : null };
    },

    async retryDelivery(webhookId, deliveryId, options) {
      const delivery = checkedId(deliveryId, 'delivery_id');
      await onLockedEndpoint(webhookId, options, async (tx, { id }, now) => {
        if (!(await retryDelivery(tx, id, delivery, now))) throw new WebhookRequestError('not_found', 'The delivery does not exist.');
        return { value: undefined, audit: { action: 'delivery.retry', webhookId: id, details: { webhook_id: id, delivery_id: delivery } } };
      });
    },
  };
}
