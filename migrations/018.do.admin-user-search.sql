-- The admin API's user listing (docs/admin-api.md#list-users): newest first with a keyset
-- cursor on (created_at, id), and `query`, a prefix of the username, the email or the phone.
-- Usernames and emails are stored lower-case (migration 001), so a case-insensitive prefix is a
-- LIKE 'prefix%' on the column; text_pattern_ops lets that use a B-tree whatever the database's
-- collation (the unique indexes of migration 001 serve equality only under a non-C collation).
-- Each listing statement reads one of these indexes and stops after a page (docs/performance.md,
-- "Admin API"). IF NOT EXISTS: an operator of a large database may build them beforehand with
-- CREATE INDEX CONCURRENTLY under the same names, without the write lock a build here takes.
CREATE INDEX IF NOT EXISTS users_created_id_idx ON users (created_at, id);
CREATE INDEX IF NOT EXISTS users_username_prefix_idx ON users (username text_pattern_ops, created_at, id);
CREATE INDEX IF NOT EXISTS users_email_prefix_idx ON users (email text_pattern_ops, created_at, id) WHERE email IS NOT NULL;
CREATE INDEX IF NOT EXISTS users_phone_prefix_idx ON users (phone text_pattern_ops, created_at, id) WHERE phone IS NOT NULL;
