import { Type, type Static } from '@sinclair/typebox';
import { EVENT_TYPES } from '../events/events.shared.js';
import { MAX_ENDPOINT_URL_LENGTH } from './destination.js';
import type { DeliveryRow, DeliveryStatus, EndpointRow } from './webhooks.repo.js';

/**
 * The wire shapes of webhook management (docs/api.md#events-and-webhooks), one schema each, for
 * the admin API's routes and the CLI's output: Endpoint and Delivery exactly, and the requests.
 */

/** Deliveries listed per page by default, and the most a `limit` may ask for. */
export const DEFAULT_DELIVERIES_LIMIT = 50;
export const MAX_DELIVERIES_LIMIT = 200;

/** Every delivery status. */
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'delivered', 'dead'];

/** `event_types`: `["*"]` alone, or distinct event types (the service checks both rules). */
export const EventTypesSchema = Type.Array(Type.Union([Type.Literal('*'), ...EVENT_TYPES.map((t) => Type.Literal(t))]), {
  minItems: 1,
  maxItems: EVENT_TYPES.length,
  uniqueItems: true,
  description: '["*"] for every event type, or a non-empty list of distinct event types.',
});

/** An endpoint, exactly: never its secret. */
export const EndpointSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    url: Type.String(),
    event_types: Type.Array(Type.String()),
    enabled: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'WebhookEndpoint', title: 'WebhookEndpoint', additionalProperties: false },
);
export type Endpoint = Static<typeof EndpointSchema>;

/** A delivery of one event to one endpoint, exactly. */
export const DeliverySchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    event_id: Type.String({ format: 'uuid' }),
    event_type: Type.String(),
    status: Type.Union(DELIVERY_STATUSES.map((s) => Type.Literal(s))),
    attempts: Type.Integer({ minimum: 0 }),
    last_attempt_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    last_status: Type.Union([Type.Integer(), Type.Null()]),
    last_error: Type.Union([Type.String(), Type.Null()]),
    next_attempt_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'WebhookDelivery', title: 'WebhookDelivery', additionalProperties: false },
);
export type Delivery = Static<typeof DeliverySchema>;

/** `POST /admin/v0/webhooks`. */
export const CreateWebhookRequestSchema = Type.Object(
  { url: Type.String({ minLength: 1, maxLength: MAX_ENDPOINT_URL_LENGTH }), event_types: EventTypesSchema },
  { additionalProperties: false },
);
/** `PATCH /admin/v0/webhooks/{webhook_id}`. */
export const UpdateWebhookRequestSchema = Type.Object(
  { url: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_ENDPOINT_URL_LENGTH })), event_types: Type.Optional(EventTypesSchema), enabled: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
/** The query of `GET /admin/v0/webhooks/{webhook_id}/deliveries`; `limit` is a string in a query (no coercion), checked by the service. */
export const DeliveriesQuerySchema = Type.Object(
  {
    status: Type.Optional(Type.Union(DELIVERY_STATUSES.map((s) => Type.Literal(s)))),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,3}$' })),
    cursor: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);

/** The wire Endpoint of a stored endpoint. */
export function toEndpoint(row: EndpointRow): Endpoint {
  return { id: row.id, url: row.url, event_types: row.event_types, enabled: row.enabled, created_at: row.created_at.toISOString() };
}

const isoOrNull = (d: Date | null): string | null => (d === null ? null : d.toISOString());

/** The wire Delivery of a stored delivery. */
export function toDelivery(row: DeliveryRow): Delivery {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    status: row.status,
    attempts: row.attempts,
    last_attempt_at: isoOrNull(row.last_attempt_at),
    last_status: row.last_status,
    last_error: row.last_error,
    next_attempt_at: isoOrNull(row.next_attempt_at),
    created_at: row.created_at.toISOString(),
  };
}
