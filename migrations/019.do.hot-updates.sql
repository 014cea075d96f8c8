-- Room on each page for updates that change no indexed column (PostgreSQL's heap-only tuple, or
-- HOT, updates: docs/performance.md, "At a million users"). A session's `last_used_at` (written
-- at most once a minute while it is used) and a user's `last_sign_in_at` (every sign-in) are in
-- no index; with the default fillfactor of 100 a page has no room for the new row version, so
-- the update goes to another page and adds an entry to every index of the table (four for
-- sessions, ten for users), each on a random page of a large index. With free space on the
-- page, the new version stays there and no index is touched.
--
-- Takes effect for pages written from now on (no table rewrite, a SHARE UPDATE EXCLUSIVE lock
-- only): an existing database's full pages gain room as rows are deleted and vacuumed, or at
-- once with VACUUM FULL or pg_repack at a quiet time (docs/operations.md).
ALTER TABLE sessions SET (fillfactor = 85);
ALTER TABLE users SET (fillfactor = 85);
