-- The registering calls of the instance lists a JSON array :list_ids names, in file order: what
-- `why` and `ckkb diff`'s evidence show for an instance of the list (ckkb.queries.evidence).
SELECT r.id, r.list_id, r.function, r.file, r.line, r.args
FROM registrations r
WHERE r.list_id IN (SELECT value FROM json_each(:list_ids))
ORDER BY r.file, r.line
