-- The result keys already stored (ckkb.kb.ingest_keys): fleet records keep theirs in `extra`.
SELECT 'races' AS tbl, json_extract(extra, '$.key') AS key
FROM races WHERE json_extract(extra, '$.key') IS NOT NULL
UNION ALL
SELECT 'harness_results', json_extract(extra, '$.key')
FROM harness_results WHERE json_extract(extra, '$.key') IS NOT NULL
UNION ALL
SELECT 'harness_ceilings', json_extract(extra, '$.key')
FROM harness_ceilings WHERE json_extract(extra, '$.key') IS NOT NULL;
