-- Phone numbers written with the international prefix 00 in place of + are the same number
-- (src/modules/users/identifiers.ts): stored as +00..., they are rewritten to +..., unless that
-- number is already another user's (that user keeps it; the +00 row is left for an operator, as
-- the unique index would refuse the rewrite). Transactional, with every other pending migration.
UPDATE users u SET phone = '+' || substr(u.phone, 4)
 WHERE u.phone LIKE '+00%'
   AND length(u.phone) - 3 >= 8
   AND NOT EXISTS (SELECT 1 FROM users o WHERE o.phone = '+' || substr(u.phone, 4));

-- A new verification code cancels the queued emails of the address's older codes
-- (cancelPendingEmails): their pending and dead rows, found by recipient.
CREATE INDEX IF NOT EXISTS email_outbox_recipient_idx ON email_outbox (recipient) WHERE status IN ('pending', 'dead');
