-- An account's Activity page (store/audit.py, ``activity``) reads, newest first and a page at a
-- time, the audit log's entries about the account and its members' sign-ins. Without these
-- each page was a scan of the whole log and of every account's sessions; with them it is a
-- walk down one account's ids, from the cursor.
CREATE INDEX audit_log_tenant ON audit_log ((detail->>'tenant_id'), id);
CREATE INDEX sessions_tenant_id ON sessions (tenant_id, id);
