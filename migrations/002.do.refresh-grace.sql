-- Refresh grace window (decisions.md §5, REFRESH_REUSE_GRACE_SECONDS > 0).
-- Transactional (runs with every other pending migration in one transaction).
--
-- successor_ciphertext: set together with rotated_at, only when the grace window is enabled.
-- It is the successor token sealed with AES-256-GCM under a key derived (HKDF-SHA-256) from the
-- parent token itself (src/crypto/successor-seal.ts): base64url of nonce || ciphertext || tag.
-- The table holds only the parent's SHA-256, so the database alone never yields a usable token.
-- rotated_at stays the rotation time: only the guarded rotation (rotated_at IS NULL) writes it,
-- and the grace window is measured from it.
ALTER TABLE refresh_tokens ADD COLUMN successor_ciphertext text;
ALTER TABLE refresh_tokens ADD CONSTRAINT refresh_tokens_successor_only_when_rotated
  CHECK (successor_ciphertext IS NULL OR rotated_at IS NOT NULL);

-- A token is rotated once, so it has at most one successor (its "direct child"); the grace
-- check looks the child up by parent_id.
CREATE UNIQUE INDEX refresh_tokens_one_successor ON refresh_tokens (parent_id) WHERE parent_id IS NOT NULL;
