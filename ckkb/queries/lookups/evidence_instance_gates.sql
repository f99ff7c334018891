-- Per (instance, arch), for the instances a JSON array :ids names and the archs a JSON array
-- :archs names: the #if inside the instance list that drops the entry (ckkb.queries.evidence).
SELECT g.instance_id, g.arch, g.file, g.line, g.condition
FROM instance_gates g
WHERE g.instance_id IN (SELECT value FROM json_each(:ids))
  AND g.arch IN (SELECT value FROM json_each(:archs))
