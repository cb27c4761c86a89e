-- Placeholder for the dashboard branch's migration 0013 (another engineer's issue). The
-- migration runner needs the numbers 1..n without gaps, and broadcasts (0014) came first on
-- this branch; the dashboard branch's real 0013 replaces this file when the branches merge.
SELECT 1;
