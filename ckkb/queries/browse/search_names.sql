-- Full-text search over the names instances print (instance_keys), one row per instance, at most
-- 51; the printed form, else its key (the name without spaces, '*' for a run-time value). The
-- index holds every tree's rows; `instance_keys` and `instances` keep the tree being read.
SELECT k.instance_id AS id, min(coalesce(nullif(k.printed_name, ''), k.key)) AS printed_name,
       i.template, i.list_name, i.status, i.tile_m, i.tile_n, i.tile_k
FROM instance_keys k
JOIN instances i ON i.id = k.instance_id
WHERE (k.id, k.source_id) IN (
  SELECT id, source_id FROM main.instance_keys
  WHERE rowid IN (SELECT rowid FROM instance_keys_fts WHERE instance_keys_fts MATCH :q)
)
GROUP BY k.instance_id
ORDER BY i.status != 'active', i.list_name, k.instance_id
LIMIT 51
