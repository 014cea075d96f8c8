-- Initial schema: users, verification codes, devices, sessions (= refresh token families),
-- refresh tokens, email outbox, rate-limit counters. One dialect (PostgreSQL 15+) for both
-- PostgreSQL and PGlite. All timestamps are timestamptz; the service passes "now" as a
-- parameter so tests can control the clock.

CREATE TABLE users (
  id                 uuid PRIMARY KEY,
  username           text NOT NULL,
  email              text,
  phone              text,
  password_hash      text NOT NULL,
  is_email_verified  boolean NOT NULL DEFAULT false,
  is_phone_verified  boolean NOT NULL DEFAULT false,
  created_at         timestamptz NOT NULL,
  updated_at         timestamptz NOT NULL,
  CONSTRAINT users_username_format CHECK (username ~ '^[a-z0-9_]{3,32}$'),
  CONSTRAINT users_email_lowercase CHECK (email IS NULL OR email = lower(email)),
  CONSTRAINT users_phone_format CHECK (phone IS NULL OR phone ~ '^[+][0-9]{8,15}$'),
  CONSTRAINT users_email_or_phone CHECK (email IS NOT NULL OR phone IS NOT NULL)
);
-- Constraint names are mapped to 409 codes (auth.sign_up.*_taken) by the users repository.
CREATE UNIQUE INDEX users_username_key ON users (username);
CREATE UNIQUE INDEX users_email_key ON users (email);
CREATE UNIQUE INDEX users_phone_key ON users (phone);

-- One-time email verification codes: HMAC-SHA-256 of the code at rest (never the code).
-- Superseded by a newer code (resend), consumed once, dead after 5 wrong attempts.
CREATE TABLE verification_codes (
  id             uuid PRIMARY KEY,
  user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  email          text NOT NULL,
  code_hash      text NOT NULL,
  attempts       integer NOT NULL DEFAULT 0,
  created_at     timestamptz NOT NULL,
  expires_at     timestamptz NOT NULL,
  consumed_at    timestamptz,
  superseded_at  timestamptz
);
CREATE INDEX verification_codes_live_idx ON verification_codes (user_id, created_at DESC)
  WHERE consumed_at IS NULL AND superseded_at IS NULL;

CREATE TABLE devices (
  id          uuid PRIMARY KEY,
  user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  ip          text,
  user_agent  text,
  created_at  timestamptz NOT NULL
);
CREATE INDEX devices_user_idx ON devices (user_id);

-- A session is a refresh token family: its id is stable across rotations.
CREATE TABLE sessions (
  id              uuid PRIMARY KEY,
  user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  device_id       uuid REFERENCES devices (id) ON DELETE SET NULL,
  ip              text,
  user_agent      text,
  created_at      timestamptz NOT NULL,
  last_used_at    timestamptz,
  expires_at      timestamptz NOT NULL,
  revoked_at      timestamptz,
  revoked_reason  text
);
CREATE INDEX sessions_user_active_idx ON sessions (user_id, created_at) WHERE revoked_at IS NULL;

-- Refresh tokens: SHA-256 of the opaque token only. A rotated token (rotated_at set) is
-- kept so that presenting it again is recognised as reuse.
CREATE TABLE refresh_tokens (
  id          uuid PRIMARY KEY,
  session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  token_hash  text NOT NULL,
  parent_id   uuid REFERENCES refresh_tokens (id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL,
  rotated_at  timestamptz
);
CREATE UNIQUE INDEX refresh_tokens_token_hash_key ON refresh_tokens (token_hash);
CREATE INDEX refresh_tokens_session_idx ON refresh_tokens (session_id);
-- At most one live (unrotated) token per family, enforced by the database itself.
CREATE UNIQUE INDEX refresh_tokens_one_live_per_session ON refresh_tokens (session_id) WHERE rotated_at IS NULL;

-- Transactional outbox of emails (decisions.md §8). status: pending -> sent | dead | cancelled.
-- A row is leased by one worker (lease_owner, lease_expires_at) while it is being sent.
CREATE TABLE email_outbox (
  id                uuid PRIMARY KEY,
  kind              text NOT NULL,
  recipient         text NOT NULL,
  payload           jsonb NOT NULL,
  status            text NOT NULL DEFAULT 'pending',
  attempts          integer NOT NULL DEFAULT 0,
  last_error        text,
  created_at        timestamptz NOT NULL,
  next_attempt_at   timestamptz NOT NULL,
  lease_owner       text,
  lease_expires_at  timestamptz,
  sent_at           timestamptz,
  expires_at        timestamptz,
  CONSTRAINT email_outbox_status CHECK (status IN ('pending', 'sent', 'dead', 'cancelled'))
);
CREATE INDEX email_outbox_due_idx ON email_outbox (next_attempt_at) WHERE status = 'pending';

-- Fixed-window counters for rate limits, keyed by a hashed subject (never a raw address).
CREATE TABLE rate_limits (
  key           text PRIMARY KEY,
  window_start  timestamptz NOT NULL,
  hits          integer NOT NULL
);
