-- The trees for the `tree` dropdown, in build order; the first of each kind is the default.
SELECT
  name AS value,
  name || ' (' || kind
    || CASE WHEN id IN (SELECT min(id) FROM main.sources GROUP BY kind) THEN ', default' ELSE '' END
    || ')' AS label
FROM main.sources
WHERE kind IN ('ck', 'aiter') AND name IS NOT NULL
ORDER BY id
