-- The instances a JSON array :ids names, with their list's comment: what an evidence chain
-- names (ckkb.queries.evidence; no fields: the chain does not show them).
SELECT i.id, i.template, i.dir, i.file, i.line, i.list_name, i.list_id,
       l.comment AS list_comment, i.status, i.reason
FROM instances i
LEFT JOIN instance_lists l ON l.id = i.list_id
WHERE i.id IN (SELECT value FROM json_each(:ids))
