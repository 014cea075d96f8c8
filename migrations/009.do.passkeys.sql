-- Passkeys: WebAuthn Level 3 credentials that sign a user in (docs/api.md#passkeys).
-- Transactional, with every other pending migration.

-- The account's WebAuthn user handle (`user.id` of the registration options): 32 random bytes,
-- made at the user's first registration and kept for good, so every passkey of the account
-- names the same handle. It holds no username or email (W3C WebAuthn Level 3 §14.6.1).
ALTER TABLE users ADD COLUMN webauthn_user_handle bytea;
CREATE UNIQUE INDEX users_webauthn_user_handle_key ON users (webauthn_user_handle);

-- One row per registered credential. `credential_id`: the authenticator's credential id
-- (base64url), unique across the service. `public_key`: the COSE public key. `counter`: the
-- highest signature counter seen; an assertion whose counter does not increase (when non-zero)
-- is refused, by one guarded UPDATE.
CREATE TABLE passkeys (
  id             uuid PRIMARY KEY,
  user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  credential_id  text NOT NULL,
  public_key     bytea NOT NULL,
  counter        bigint NOT NULL,
  transports     text[] NOT NULL DEFAULT '{}',
  device_type    text NOT NULL,
  backed_up      boolean NOT NULL,
  name           text,
  created_at     timestamptz NOT NULL,
  last_used_at   timestamptz
);
CREATE UNIQUE INDEX passkeys_credential_id_key ON passkeys (credential_id);
CREATE INDEX passkeys_user_idx ON passkeys (user_id, created_at);

-- WebAuthn challenges, single use (deleted when used), 300 s. A registration challenge belongs
-- to the signed-in user (`user_id`); a sign-in challenge to the browser that holds the
-- `webauthn_challenge` cookie, stored as the SHA-256 of the cookie's value (`token_hash`).
CREATE TABLE webauthn_challenges (
  id          uuid PRIMARY KEY,
  purpose     text NOT NULL CHECK (purpose IN ('registration', 'authentication')),
  challenge   text NOT NULL,
  user_id     uuid REFERENCES users (id) ON DELETE CASCADE,
  token_hash  text,
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  CHECK ((purpose = 'registration') = (user_id IS NOT NULL)),
  CHECK ((purpose = 'authentication') = (token_hash IS NOT NULL))
);
CREATE UNIQUE INDEX webauthn_challenges_token_hash_key ON webauthn_challenges (token_hash);
CREATE INDEX webauthn_challenges_user_idx ON webauthn_challenges (user_id, challenge);
CREATE INDEX webauthn_challenges_expires_idx ON webauthn_challenges (expires_at);
