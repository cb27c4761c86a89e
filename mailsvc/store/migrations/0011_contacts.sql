-- PLACEHOLDER on the `builder` branch only. Number 0011 belongs to the contacts migration of
-- another branch; migrations must be numbered 1..n without gaps, so this empty step stands in
-- for it until the branches meet. When merging: keep the contacts branch's 0011 file and
-- DELETE this one (a second 0011 makes every start fail: "not 1..n without gaps").
SELECT 1;
