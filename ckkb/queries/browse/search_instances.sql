-- Full-text search over instances (template, list name, file), at most 51 rows (50 shown). The
-- index holds every tree's rows (main.instances' rowids); `instances` keeps the tree being read.
SELECT i.id, i.template, i.list_name, i.dir, i.tile_m, i.tile_n, i.tile_k, i.status
FROM instances i
WHERE (i.id, i.source_id) IN (
  SELECT id, source_id FROM main.instances
  WHERE rowid IN (SELECT rowid FROM instances_fts WHERE instances_fts MATCH :q)
)
ORDER BY i.status != 'active', i.dir, i.list_name, i.line
LIMIT 51
