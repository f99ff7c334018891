-- The CK trees, for version_diff's `from` and `to` dropdowns, in build order.
SELECT
  name AS value,
  name || CASE WHEN version IS NOT NULL AND version != name THEN ' (CK ' || version || ')'
               ELSE '' END AS label
FROM main.sources
WHERE kind = 'ck' AND name IS NOT NULL
ORDER BY id
