-- The version of a user's password: 1 at sign-up, one more at every change or reset of the
-- password, unchanged when the service re-hashes the same password with stronger argon2id
-- parameters. What a session, a second sign-in step, a passkey sign-in or an account deletion
-- checks to know that the password did not change since it was verified: comparing the hash
-- itself refused those whenever a parallel sign-in had upgraded the hash.
ALTER TABLE users ADD COLUMN password_version integer NOT NULL DEFAULT 1;

-- A challenge keeps the version its password step checked; it no longer keeps a copy of the
-- hash (rows written before this migration live at most 300 s and keep theirs until purged).
ALTER TABLE mfa_challenges ADD COLUMN password_version integer NOT NULL DEFAULT 1;
ALTER TABLE mfa_challenges ALTER COLUMN password_hash DROP NOT NULL;
