-- Sign-in with an identity provider (docs/api.md#sign-in-with-an-identity-provider).
-- Transactional, with every other pending migration.

-- One row per authorization flow (authorize or link), single use, 600 s. The flow lives here,
-- never in a process's memory, so the provider's callback may land on any instance.
--   state_hash    SHA-256 of the `state` sent to the provider: how the callback finds its flow.
--   browser_hash  SHA-256 of the `oauth_flow` cookie's value, a separate secret that binds the
--                 flow to the browser that started it (the `state` travels through the provider
--                 and the address bar; the cookie does not).
--   code_verifier the PKCE verifier (RFC 7636), sent once with the code exchange.
--   nonce         the OpenID Connect nonce the ID token must carry (null for OAuth 2.0 providers).
--   mode          `sign_in`, or `link` with the linking user and the session that asked.
-- A callback consumes its flow with one guarded UPDATE (consumed_at IS NULL, not expired, same
-- provider, same browser): of two callbacks with one state exactly one wins. The retention
-- worker deletes flows once they expired (index oauth_flows_expires_idx).
CREATE TABLE oauth_flows (
  id             uuid PRIMARY KEY,
  provider       text NOT NULL,
  state_hash     text NOT NULL,
  browser_hash   text NOT NULL,
  code_verifier  text NOT NULL,
  nonce          text,
  redirect_to    text NOT NULL,
  mode           text NOT NULL CHECK (mode IN ('sign_in', 'link')),
  user_id        uuid REFERENCES users (id) ON DELETE CASCADE,
  session_id     uuid REFERENCES sessions (id) ON DELETE CASCADE,
  created_at     timestamptz NOT NULL,
  expires_at     timestamptz NOT NULL,
  consumed_at    timestamptz,
  CHECK ((mode = 'link') = (user_id IS NOT NULL AND session_id IS NOT NULL))
);
CREATE UNIQUE INDEX oauth_flows_state_hash_key ON oauth_flows (state_hash);
CREATE INDEX oauth_flows_expires_idx ON oauth_flows (expires_at);
-- Deleting a user or a session cascades here: the foreign keys need their own indexes.
CREATE INDEX oauth_flows_user_idx ON oauth_flows (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX oauth_flows_session_idx ON oauth_flows (session_id) WHERE session_id IS NOT NULL;

-- The identities a user signs in with: one row per account at a provider, unique per
-- (issuer, subject) across the service. `provider` is the configured id (shown to the user),
-- `issuer` the provider's issuer identifier (GitHub: its web URL), `subject` the provider's
-- stable user id (`sub`; GitHub: the numeric id). `email`: the provider's verified address at
-- the last sign-in or link, else null. `last_sign_in_at`: null until the identity signs in.
-- Deleted with its user.
CREATE TABLE user_identities (
  id               uuid PRIMARY KEY,
  user_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  provider         text NOT NULL,
  issuer           text NOT NULL,
  subject          text NOT NULL,
  email            text,
  created_at       timestamptz NOT NULL,
  last_sign_in_at  timestamptz
);
CREATE UNIQUE INDEX user_identities_issuer_subject_key ON user_identities (issuer, subject);
CREATE INDEX user_identities_user_idx ON user_identities (user_id, created_at);

-- A second sign-in step may now follow a provider's sign-in, for a user who may have no
-- password: the challenge keeps the `amr` of its first step (RFC 8176; `pwd`, or `oauth`),
-- which the session gets with `otp` added, and the hash it copies may be absent.
ALTER TABLE mfa_challenges ADD COLUMN amr text[] NOT NULL DEFAULT '{pwd}';
ALTER TABLE mfa_challenges ALTER COLUMN password_hash DROP NOT NULL;
