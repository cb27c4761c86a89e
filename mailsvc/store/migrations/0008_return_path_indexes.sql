-- The return path's look-ups, made on an unauthenticated port, each backed by an index so a
-- peer cannot make us scan a table: every RCPT asks whether its host is a return-path host,
-- and a feedback report without a VERP address is matched by our own Message-ID.

CREATE INDEX domains_return_path_host ON domains ((return_path || '.' || name));
CREATE INDEX emails_message_id ON emails (message_id);
