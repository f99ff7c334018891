-- The source ids a (scoped) connection reads: keys per-tree caches (the race chart's links).
SELECT group_concat(id) AS trees FROM (SELECT id FROM sources ORDER BY id)
