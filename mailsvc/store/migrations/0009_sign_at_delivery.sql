-- DKIM signing moves from acceptance to delivery: a message is stored unsigned and signed
-- right before each SMTP transaction with the domain's keys of that moment. Mail queued
-- before this change was stored signed and must not be signed twice. The default stays true,
-- and the accept statement writes false: an older node still accepting during an upgrade
-- stores signed mail without naming the column, and it is marked signed all the same.
-- (Adding a column with a constant default rewrites no row.) The flag covers the email's
-- per-recipient messages (deliveries.message) too: both are written by the same statement.
ALTER TABLE emails ADD COLUMN signed boolean NOT NULL DEFAULT true;
