-- Outbox status `suppressed`: a row finished without sending anything, because there was nothing
-- to send (a password-reset request for an address no account has). Before, such rows were
-- marked `sent`, and `latchkey outbox list` showed an email that never left (docs/operations.md,
-- "Dead emails: the outbox CLI"). Existing rows keep their status.
-- Transactional, with every other pending migration. The previous version of the service never
-- writes `suppressed`, and its queries of finished rows still find an index below.
ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_status;
ALTER TABLE email_outbox ADD CONSTRAINT email_outbox_status
  CHECK (status IN ('pending', 'sent', 'suppressed', 'dead', 'cancelled'));

-- Finished rows for retention (RETENTION_OUTBOX_DAYS), suppressed ones included. The new index
-- is built before the old one (migration 003) is dropped, so retention keeps an index
-- throughout; its condition covers the old one's, so the previous version's retention query
-- (sent and cancelled) can use it too. IF NOT EXISTS: an operator of a large database may build
-- it beforehand with CREATE INDEX CONCURRENTLY under the same name.
CREATE INDEX IF NOT EXISTS email_outbox_ended_idx ON email_outbox (created_at) WHERE status IN ('sent', 'suppressed', 'cancelled');
DROP INDEX IF EXISTS email_outbox_finished_idx;
