-- One-time codes of every purpose in one table (src/modules/codes/): email verification, password
-- reset, and later email change. A code of one purpose never works for another: every lookup,
-- supersession and consumption names the purpose. Existing rows are verification codes.
-- Transactional, with every other pending migration.
ALTER TABLE verification_codes ADD COLUMN purpose text NOT NULL DEFAULT 'verification';
ALTER TABLE verification_codes ADD CONSTRAINT verification_codes_purpose
  CHECK (purpose IN ('verification', 'password_reset', 'email_change'));

-- The live code of a user for one purpose: the lookup of every attempt and the supersession of
-- every new code. Built under a new name, then the old index (user_id, created_at) is dropped, so
-- lookups keep an index throughout. IF NOT EXISTS, so an operator of a large database can build
-- it beforehand with CREATE INDEX CONCURRENTLY under the same name, without the write lock a
-- build here takes.
CREATE INDEX IF NOT EXISTS verification_codes_live_purpose_idx ON verification_codes (user_id, purpose, created_at DESC)
  WHERE consumed_at IS NULL AND superseded_at IS NULL;
DROP INDEX IF EXISTS verification_codes_live_idx;
