-- The deadline a refresh's rotation statement checks against the database clock
-- (docs/reliability.md, "Database silent"): the rotation runs as one statement on its own
-- (autocommit), without BEGIN/COMMIT, so a copy of it that reaches the server only after its
-- request gave up (answered 503) must not commit. The statement calls this function after its
-- row locks are taken and its writes are done, and before it commits; `deadline` is the
-- database-clock time until which the service still awaits the answer, less a margin
-- (src/db/statement-deadline.ts). Past it, the statement fails with SQLSTATE 57014
-- (query_canceled, as a statement_timeout does) and its writes roll back.
-- `after` is ignored: the caller passes the row counts of its data-modifying CTEs, so that they
-- are evaluated (and their lock waits over) before the check. A null deadline checks nothing
-- (the embedded database, which runs in the service's process and has no network between them).
-- Volatile: clock_timestamp() is read on every call, never folded into a plan.
CREATE FUNCTION statement_deadline_check(deadline timestamptz, after bigint) RETURNS boolean
  LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  IF deadline IS NOT NULL AND clock_timestamp() > deadline THEN
    RAISE EXCEPTION 'statement reached the database after its deadline (%)', deadline USING ERRCODE = 'query_canceled';
  END IF;
  RETURN true;
END
$$;
