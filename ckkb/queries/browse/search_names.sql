-- Full-text search over the names instances print (instance_keys), one row per instance, at most 51.
SELECT k.instance_id AS id, min(k.printed_name) AS printed_name, k.list_name, k.status
FROM instance_keys_fts f JOIN instance_keys k ON k.rowid = f.rowid
WHERE instance_keys_fts MATCH :q
GROUP BY k.instance_id
ORDER BY k.status != 'active', k.list_name, k.instance_id
LIMIT 51
