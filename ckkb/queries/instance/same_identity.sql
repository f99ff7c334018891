-- The instances of the tree being read that are the same instance as one given: the same device
-- op and the same resolved template arguments (the identity `ckkb diff` uses; never file or
-- line, so a list moved to another file is the same instance). Active entries first.
SELECT id, list_id, list_name, status, file, line
FROM instances
WHERE template = :template AND resolved = :resolved
ORDER BY status <> 'active', id
