-- How each session's sign-in was authenticated (RFC 8176 `amr`, docs/api.md#access-token): the
-- access tokens of the session carry it, across refreshes. Every session so far was signed in
-- with a password. A constant default: no table rewrite. Transactional, with every other
-- pending migration.
ALTER TABLE sessions ADD COLUMN amr text[] NOT NULL DEFAULT '{pwd}';
