-- The version of a user's password: 1 at sign-up, one more at every change or reset of the
-- password, unchanged when the service re-hashes the same password with stronger argon2id
-- parameters. What a session, a second sign-in step, a passkey sign-in or an account deletion
-- checks to know that the password did not change since it was verified: comparing the hash
-- itself refused those whenever a parallel sign-in had upgraded the hash.
ALTER TABLE users ADD COLUMN password_version integer NOT NULL DEFAULT 1;
-- When the hash was last replaced by a re-hash of the same password (the upgrade sets it).
ALTER TABLE users ADD COLUMN password_rehashed_at timestamptz;

-- The rule, kept by the database whatever code writes: a new hash is a new password, raising
-- the version, unless the same statement marks it as a re-hash (a new password_rehashed_at) or
-- raises the version itself. So an instance of the previous version, still running during a
-- rolling upgrade, changes or resets a password in a way every check of the version sees.
CREATE FUNCTION users_password_version_rule() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF NEW.password_hash IS DISTINCT FROM OLD.password_hash
     AND NEW.password_version = OLD.password_version
     AND NEW.password_rehashed_at IS NOT DISTINCT FROM OLD.password_rehashed_at THEN
    NEW.password_version := OLD.password_version + 1;
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER users_password_version BEFORE UPDATE OF password_hash ON users
  FOR EACH ROW EXECUTE FUNCTION users_password_version_rule();

-- A challenge keeps the version its password step checked. It still keeps the hash too, for
-- an instance of the previous version that completes the second step during a rolling upgrade.
ALTER TABLE mfa_challenges ADD COLUMN password_version integer NOT NULL DEFAULT 1;
