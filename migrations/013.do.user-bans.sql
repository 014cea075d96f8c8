-- Bans (docs/api.md, admin API: "Bans"), the last sign-in, and users without a password.
--
-- A ban is in force while `banned_at` is set and `banned_until` is unset (indefinite) or still
-- ahead. Sign-in refuses a banned user once the first credential checked out; the statement
-- that creates a session and the Bearer check read these columns in the statements they
-- already run, so a ban costs no round trip. A ban that has run out is simply ignored (and
-- cleared by the next ban or unban); nothing needs to wake up when it ends.
ALTER TABLE users ADD COLUMN banned_at timestamptz;
ALTER TABLE users ADD COLUMN banned_until timestamptz;
ALTER TABLE users ADD COLUMN ban_reason text;
ALTER TABLE users ADD CONSTRAINT users_ban_consistent
  CHECK (banned_at IS NOT NULL OR (banned_until IS NULL AND ban_reason IS NULL));

-- A user created by an operator without a password has none (NULL) until a password reset sets
-- one; password sign-in treats it as a wrong password, at the same argon2id cost. The version
-- rule of migration 011 counts setting one as a change.
ALTER TABLE users ALTER COLUMN password_hash DROP NOT NULL;

-- When the user last signed in (any method): set by the statement that creates a session, which
-- already locks the user row. Shown by the admin API; unknown (NULL) for earlier sign-ins.
ALTER TABLE users ADD COLUMN last_sign_in_at timestamptz;
