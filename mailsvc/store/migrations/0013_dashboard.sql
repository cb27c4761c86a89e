-- Placeholder: 0013 is reserved for the dashboard branch; its real migration replaces this
-- file at merge (the runner needs the numbers 1..n without gaps).
SELECT 1;
