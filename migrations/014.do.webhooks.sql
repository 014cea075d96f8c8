-- Events and webhooks (docs/api.md#events-and-webhooks).
--
-- Every change an app may care about is recorded as a row of `webhook_events` in the
-- transaction (or the one statement) of the change: an event exists if and only if its change
-- committed. Recording is one INSERT and nothing else: the row names the endpoints that were
-- enabled and subscribed to its type at that moment (`pending_endpoint_ids`, read from the small
-- `webhook_endpoints` table by the same INSERT), and the delivery worker fans it out into one
-- `webhook_deliveries` row per endpoint later, off the request path.

-- A UUID version 7 (RFC 9562 §5.7) for the instant `at`: 48 bits of Unix milliseconds, the
-- version 7, then a 42-bit counter in rand_a and the top of rand_b (RFC 9562 §6.2, method 1:
-- ids made within one millisecond sort in the order they were made) and 32 random bits. Rows
-- keyed by it are inserted at the right edge of their primary key, and the key orders them by
-- time, so one index serves lookups, keyset listings and the retention purge ("older than X" is
-- a range of the key). The counter cycles after 2^42 ids. VOLATILE: every call is new.
CREATE SEQUENCE uuid_v7_counter AS bigint MINVALUE 0 MAXVALUE 4398046511103 CYCLE;
-- PL/pgSQL rather than SQL: a session keeps its plan, where an SQL function that cannot be
-- inlined is planned again in every statement that calls it (about 120 µs more per sign-in).
CREATE FUNCTION uuid_v7(at timestamptz) RETURNS uuid
  LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
  AS $$
DECLARE
  c bigint := nextval('uuid_v7_counter');
BEGIN
  RETURN (lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0')
          || '7' || lpad(to_hex((c >> 30) & 4095), 3, '0')
          || to_hex(8 | ((c >> 28) & 3)) || lpad(to_hex(c & 268435455), 7, '0')
          || substr(md5(gen_random_uuid()::text), 1, 8))::uuid;
END
$$;

-- Webhook endpoints, managed by the operator (a handful of rows: every event's INSERT reads
-- the table whole). `event_types` is {'*'} or distinct event types. The signing secret is stored
-- encrypted (AES-256-GCM under the key of WEBHOOK_KEY_FILE, the endpoint id as additional data);
-- after a rotation the previous one signs too until `previous_secret_expires_at`.
CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY,
  url text NOT NULL,
  event_types text[] NOT NULL CHECK (cardinality(event_types) > 0),
  enabled boolean NOT NULL DEFAULT true,
  -- Why it was disabled, for operators: 'operator' or 'gone' (the receiver answered 410).
  disabled_reason text,
  secret text NOT NULL,
  previous_secret text,
  previous_secret_expires_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT webhook_endpoints_previous_secret CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL))
);

-- Events. `id` is a UUIDv7 of `occurred_at` (the `webhook-id` header); `data` is kept as the JSON
-- text it was recorded with (json, not jsonb: its members keep their order). `pending_endpoint_ids`
-- holds the endpoints still to fan out to; NULL once fanned out, or from the start when no
-- endpoint was subscribed (then no index below holds the row).
CREATE TABLE webhook_events (
  id uuid PRIMARY KEY,
  type text NOT NULL,
  data json NOT NULL,
  occurred_at timestamptz NOT NULL,
  pending_endpoint_ids uuid[]
);
-- The fan-out's claim: only events not yet fanned out, oldest first. Empty when idle.
CREATE INDEX webhook_events_fanout_idx ON webhook_events (id) WHERE pending_endpoint_ids IS NOT NULL;

-- Deliveries: one per event and endpoint. `id` is a UUIDv7 of `created_at`. `status` pending,
-- delivered or dead; `held` is true while its endpoint is disabled (a pending delivery then
-- waits, outside the claim's index). `attempts` counts every attempt; `schedule_attempts` the
-- failed attempts since it was created or last retried by an operator, its place in the retry
-- schedule. `lease_owner`/`lease_expires_at`: the worker making an attempt right now, as in
-- `email_outbox`.
CREATE TABLE webhook_deliveries (
  id uuid PRIMARY KEY,
  event_id uuid NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_type text NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  held boolean NOT NULL DEFAULT false,
  attempts integer NOT NULL DEFAULT 0,
  schedule_attempts integer NOT NULL DEFAULT 0,
  last_attempt_at timestamptz,
  last_status integer,
  last_error text,
  next_attempt_at timestamptz,
  lease_owner text,
  lease_expires_at timestamptz,
  created_at timestamptz NOT NULL,
  CONSTRAINT webhook_deliveries_status CHECK (status IN ('pending', 'delivered', 'dead')),
  CONSTRAINT webhook_deliveries_next_attempt CHECK ((status = 'pending') = (next_attempt_at IS NOT NULL)),
  -- One delivery per event and endpoint, whatever happens to a fan-out; also the index of the
  -- event purge's "no delivery left" check.
  CONSTRAINT webhook_deliveries_event_endpoint UNIQUE (event_id, endpoint_id)
);
-- The worker's claim: due, deliverable rows only, by due time; rows waiting for a retry later or
-- for a disabled endpoint cost nothing, so an idle round is one probe at any table size.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending' AND NOT held;
-- An endpoint's deliveries, newest first, with or without a status (the operator's listing, keyset by id),
-- and its pending ones (held or released when it is disabled or enabled).
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id);
CREATE INDEX webhook_deliveries_endpoint_status_idx ON webhook_deliveries (endpoint_id, status, id);
-- Dead deliveries: their count (metric) and their retention.
CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (id) WHERE status = 'dead';
