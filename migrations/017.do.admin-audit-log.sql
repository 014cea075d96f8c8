-- The admin API's audit log (docs/admin-api.md#audit-log): one row per change made through the
-- admin API or an operator command, written in the transaction of the change, so a change that
-- rolls back leaves no row. Rows are never updated (the trigger below refuses it) and are
-- deleted only by the retention worker, RETENTION_ADMIN_AUDIT_DAYS after they were written.
CREATE TABLE admin_audit_log (
  id          uuid PRIMARY KEY,
  at          timestamptz NOT NULL,
  -- The API key that made the change; NULL for an operator command (key_name 'cli'). No foreign
  -- key: keys are never deleted, and the entry stands on its own.
  key_id      uuid,
  key_name    text NOT NULL,
  action      text NOT NULL,
  -- The user the change was about; NULL for changes about no user. No foreign key: the entry of
  -- a deletion outlives the user it is about.
  user_id     uuid,
  -- The client address as the service saw it (TRUST_PROXY applied); NULL for a command.
  ip          text,
  -- The X-Request-Id of the answer; NULL for a command.
  request_id  text,
  -- Facts of the change, never a password, secret or code.
  details     jsonb NOT NULL DEFAULT '{}'::jsonb
);
-- The listing, newest first, with its keyset cursor (at, id); and the retention purge, oldest first.
CREATE INDEX admin_audit_log_at_idx ON admin_audit_log (at, id);
-- The listing of one user's entries.
CREATE INDEX admin_audit_log_user_idx ON admin_audit_log (user_id, at, id) WHERE user_id IS NOT NULL;

-- Append-only: no statement of any version of the service may change an entry.
CREATE FUNCTION admin_audit_log_append_only() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  RAISE EXCEPTION 'admin_audit_log entries are never changed';
END;
$$;
CREATE TRIGGER admin_audit_log_no_update BEFORE UPDATE ON admin_audit_log
  FOR EACH ROW EXECUTE FUNCTION admin_audit_log_append_only();
