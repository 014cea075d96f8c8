-- Second factor: TOTP (RFC 6238) with recovery codes (docs/api.md#second-factor).
-- Transactional, with every other pending migration.

-- One TOTP authenticator per user. `secret` is AES-256-GCM ciphertext under a key derived from
-- MFA_KEY_FILE (src/modules/mfa/totp-secret.ts), never the secret itself. `enabled_at` NULL:
-- set up, not turned on yet. `last_step`: the highest time step accepted for the user; a step
-- at or below it is refused (replay), by one guarded UPDATE.
CREATE TABLE mfa_totp (
  user_id     uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  secret      text NOT NULL,
  enabled_at  timestamptz,
  last_step   bigint,
  created_at  timestamptz NOT NULL
);

-- Recovery codes: HMAC-SHA-256 at rest, single use (`used_at`).
CREATE TABLE mfa_recovery_codes (
  id         uuid PRIMARY KEY,
  user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  code_hash  text NOT NULL,
  used_at    timestamptz,
  created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX mfa_recovery_codes_user_hash_key ON mfa_recovery_codes (user_id, code_hash);

-- Sign-in challenges of users with a second factor: the SHA-256 of the `mfa_challenge` cookie,
-- 5 tries, 300 s. `password_hash` is the hash the password step checked: the session is created
-- only while it is still the user's (a password changed meanwhile ends the challenge).
CREATE TABLE mfa_challenges (
  id             uuid PRIMARY KEY,
  token_hash     text NOT NULL,
  user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  password_hash  text NOT NULL,
  attempts       integer NOT NULL DEFAULT 0,
  created_at     timestamptz NOT NULL,
  expires_at     timestamptz NOT NULL,
  consumed_at    timestamptz
);
CREATE UNIQUE INDEX mfa_challenges_token_hash_key ON mfa_challenges (token_hash);
CREATE INDEX mfa_challenges_expires_idx ON mfa_challenges (expires_at);
