-- Full-text search over the names instances print (instance_keys), one row per instance, at most
-- 51; the printed form, else its key (the name without spaces, '*' for a run-time value).
SELECT k.instance_id AS id, min(coalesce(nullif(k.printed_name, ''), k.key)) AS printed_name,
       i.template, i.list_name, i.status, i.tile_m, i.tile_n, i.tile_k
FROM instance_keys_fts f
JOIN instance_keys k ON k.rowid = f.rowid
JOIN instances i ON i.id = k.instance_id
WHERE instance_keys_fts MATCH :q
GROUP BY k.instance_id
ORDER BY i.status != 'active', i.list_name, k.instance_id
LIMIT 51
