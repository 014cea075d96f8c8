-- Refresh tokens that name their row (docs/api.md#refresh-token-format; src/crypto/refresh-token.ts).
--
-- A refresh token of the current format (2) is its row's id (a time-ordered UUID, version 7)
-- followed by 32 random bytes; a rotation finds the presented token through the primary key,
-- whose recent entries stay on a few pages, and compares the stored SHA-256 of the token. Tokens
-- of format 1, issued before, are 32 random bytes and are found by their SHA-256 alone. The
-- unique index over every token's hash, which each rotation had to insert into at a random
-- place (docs/performance.md, "At a million users"), is replaced by one over the tokens of
-- format 1 only: it shrinks as their sessions end and takes no new entries.
--
-- Existing rows are of format 1 (a constant default: no table rewrite). Rows inserted from now on
-- are of format 2 unless they say otherwise; the service names the format in each insert. An
-- instance of an earlier version would insert tokens of format 1 as format 2, which it could not
-- find again: every old instance stops before this migration (docs/operations.md).
ALTER TABLE refresh_tokens ADD COLUMN format smallint NOT NULL DEFAULT 1;
ALTER TABLE refresh_tokens ALTER COLUMN format SET DEFAULT 2;
ALTER TABLE refresh_tokens ADD CONSTRAINT refresh_tokens_format CHECK (format IN (1, 2));
CREATE UNIQUE INDEX IF NOT EXISTS refresh_tokens_format_1_hash_key ON refresh_tokens (token_hash) WHERE format = 1;
DROP INDEX IF EXISTS refresh_tokens_token_hash_key;
