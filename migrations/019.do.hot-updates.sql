-- Updates on the hot paths that stay on their page and touch no index (PostgreSQL's heap-only
-- tuple, or HOT, updates; docs/performance.md, "At a million users"). An update is HOT when it
-- changes no column an index reads (as a key, in an expression or in a partial index's WHERE)
-- and the page has room for the new row version; otherwise the new version goes to another
-- page and gets an entry in every index of the table, each on a random page of a large index.
--
-- 1. Room on each page. A session's `last_used_at` (written at most once a minute while it is
--    used), a user's `last_sign_in_at` (every sign-in) and a refresh token's `rotated_at` (once,
--    at its rotation) are written after the row; with the default fillfactor of 100 a page has
--    no room for the new version. Takes effect for pages written from now on (no rewrite, a
--    SHARE UPDATE EXCLUSIVE lock only): an existing database's full pages gain room as rows are
--    deleted and vacuumed, or at once with VACUUM FULL or pg_repack at a quiet time
--    (docs/operations.md).
ALTER TABLE sessions SET (fillfactor = 85);
ALTER TABLE users SET (fillfactor = 85);
ALTER TABLE refresh_tokens SET (fillfactor = 80);

-- 2. A rotation writes `rotated_at`, which two indexes read: the partial unique index that
--    allowed one live (unrotated) token per session, and the index of sealed successors by
--    rotation time. Both are replaced by indexes on columns a rotation under the strict rule
--    (the default, docs/api.md#reuse-detection) does not change.
--
--    One live token per session, from columns written once: one token without a parent per
--    session (the first, made with the session at sign-in) and one child per token
--    (`refresh_tokens_one_successor`, migration 002), so a family is a single chain. Its last
--    token is the only one without a child, and the only unrotated one: a child is inserted
--    only by the statement that marks its parent rotated, guarded by "not yet rotated"
--    (docs/api.md#refresh-token-rotation). Every database written by an earlier version already
--    has one root per session (tokens are deleted only with their session).
CREATE UNIQUE INDEX IF NOT EXISTS refresh_tokens_one_root_per_session ON refresh_tokens (session_id) WHERE parent_id IS NULL;
DROP INDEX IF EXISTS refresh_tokens_one_live_per_session;
--    Sealed successors (grace window only) by the time they were sealed, a column of their own
--    that a rotation under the strict rule (no seal) leaves NULL and so does not change. The
--    retention worker erases seals whose window has passed; the index holds only the seals of
--    the last window. An instance of an earlier version seals without `sealed_at`, which the
--    constraint refuses: every old instance stops before this migration (docs/operations.md).
ALTER TABLE refresh_tokens ADD COLUMN sealed_at timestamptz;
UPDATE refresh_tokens SET sealed_at = rotated_at WHERE successor_ciphertext IS NOT NULL;
ALTER TABLE refresh_tokens ADD CONSTRAINT refresh_tokens_sealed_at_with_seal
  CHECK ((successor_ciphertext IS NULL) = (sealed_at IS NULL)) NOT VALID;
ALTER TABLE refresh_tokens VALIDATE CONSTRAINT refresh_tokens_sealed_at_with_seal;
CREATE INDEX IF NOT EXISTS refresh_tokens_sealed_at_idx ON refresh_tokens (sealed_at) WHERE sealed_at IS NOT NULL;
DROP INDEX IF EXISTS refresh_tokens_sealed_idx;
