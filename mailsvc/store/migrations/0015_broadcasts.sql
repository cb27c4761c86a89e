-- Placeholder: 0015 is reserved for the broadcasts branch (issue 8), whose real migration
-- replaces this file at merge. The runner wants the numbers 1..n without gaps, and the
-- deliverability branch's own migration is 0016.
SELECT 1;
