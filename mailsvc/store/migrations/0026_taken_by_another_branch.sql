-- Keeps migration numbers without gaps on this branch only: number 26 belongs to a change made
-- beside this one, and this file is dropped when the two are merged.
SELECT 1;
