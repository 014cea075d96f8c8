-- Unverified accounts expire (docs/api.md#unverified-accounts-expire): the retention worker deletes
-- users whose email was never verified UNVERIFIED_ACCOUNT_TTL_SECONDS after sign-up, oldest
-- first, in bounded batches under this index. It holds only the users still waiting for their
-- verification (verified users and users without email leave it), so the purge never reads the
-- table of verified users. Transactional, with every other pending migration; IF NOT EXISTS, so
-- an operator of a large database can build it beforehand with CREATE INDEX CONCURRENTLY under
-- the same name.
CREATE INDEX IF NOT EXISTS users_unverified_created_idx ON users (created_at) WHERE email IS NOT NULL AND NOT is_email_verified;
