-- Full-text search over instances (template, list name, file), at most 51 rows (50 shown).
SELECT i.id, i.template, i.list_name, i.dir, i.tile_m, i.tile_n, i.tile_k, i.status
FROM instances_fts f JOIN instances i ON i.rowid = f.rowid
WHERE instances_fts MATCH :q
ORDER BY i.status != 'active', i.dir, i.list_name, i.line
LIMIT 51
