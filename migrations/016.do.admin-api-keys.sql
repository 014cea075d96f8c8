-- Admin API keys (docs/admin-api.md#api-keys). A key is `lk_admin_<id>_<secret>`: the id (this
-- table's primary key, 32 hex digits in the key) finds the row in one indexed read, and only the
-- SHA-256 of the whole key is stored. The secret is 256 random bits, so a fast hash is enough:
-- nobody can try 2^256 candidates, slowly hashed or not (docs/security.md, "Admin API").
-- Keys are made, listed and revoked by the CLI only (`latchkey admin-keys ...`); a revoked key
-- stays, so the audit log's key_id keeps naming a row.
CREATE TABLE admin_api_keys (
  id            uuid PRIMARY KEY,
  name          text NOT NULL,
  -- What the key may do; the admin API checks the scope of every route against this list.
  scopes        text[] NOT NULL,
  -- SHA-256 of the key's text, base64url (43 characters).
  key_hash      text NOT NULL,
  created_at    timestamptz NOT NULL,
  -- Written at most once a minute per key, so a busy backend does not write on every request.
  last_used_at  timestamptz,
  -- NULL: the key does not expire.
  expires_at    timestamptz,
  revoked_at    timestamptz,
  CONSTRAINT admin_api_keys_name_length CHECK (char_length(name) BETWEEN 1 AND 64),
  CONSTRAINT admin_api_keys_scopes_known CHECK (
    cardinality(scopes) > 0
    AND scopes <@ ARRAY['users:read', 'users:write', 'sessions:write', 'webhooks', 'audit:read']::text[]
  )
);
