-- Placeholder only (branch devmail): 0019 belongs to another branch (api_keys.created_by and
-- throttle tables); the migration numbers must run 1..n without gaps. Drop this file when
-- merging with that branch's 0019.
SELECT 1;
