-- Retention (docs/operations.md, "Retention"): the indexes under which the retention worker
-- (src/modules/retention/) deletes ended rows in bounded batches, and under which the outbox
-- worker and the /metrics scrape read only the rows they need, never the whole table.
-- Transactional (runs with every other pending migration in one transaction). Every index is
-- IF NOT EXISTS, so an operator of a large database can build them beforehand with
-- CREATE INDEX CONCURRENTLY under the same names, without the write lock a build here takes.

-- Sessions by the time they stopped being usable: the earlier of expiry and revocation
-- (least() ignores a NULL revoked_at). The purge deletes in this order.
CREATE INDEX IF NOT EXISTS sessions_ended_idx ON sessions ((least(expires_at, revoked_at)));
-- Deleting a device sets sessions.device_id to NULL (ON DELETE SET NULL): without this index
-- each deleted device would scan the whole sessions table. The purge also looks up a device's
-- remaining sessions with it.
CREATE INDEX IF NOT EXISTS sessions_device_idx ON sessions (device_id);

-- Verification codes by the time they stopped being usable: the earliest of expiry,
-- consumption and supersession.
CREATE INDEX IF NOT EXISTS verification_codes_ended_idx ON verification_codes ((least(expires_at, consumed_at, superseded_at)));

-- Finished outbox rows (sent, cancelled) and dead rows, by the time they were queued: a row is
-- finished at most one code lifetime (at most a day) after it was queued, since the worker
-- cancels a row whose code expired. The dead index also serves the dead count of /metrics.
CREATE INDEX IF NOT EXISTS email_outbox_finished_idx ON email_outbox (created_at) WHERE status IN ('sent', 'cancelled');
CREATE INDEX IF NOT EXISTS email_outbox_dead_idx ON email_outbox (created_at) WHERE status = 'dead';
-- Dead rows that still hold their code: the outbox worker drops the code once it expired, every
-- round (every second), which without this index scanned the whole table.
CREATE INDEX IF NOT EXISTS email_outbox_dead_code_idx ON email_outbox (expires_at) WHERE status = 'dead' AND payload ? 'code';

-- Sealed successors of the refresh grace window (migration 002), by rotation time: they are
-- erased once the window has passed, so this index holds only the last window's rotations.
CREATE INDEX IF NOT EXISTS refresh_tokens_sealed_idx ON refresh_tokens (rotated_at) WHERE successor_ciphertext IS NOT NULL;

-- Rate-limit windows by start, for the batched purge of ended windows.
CREATE INDEX IF NOT EXISTS rate_limits_window_start_idx ON rate_limits (window_start);
