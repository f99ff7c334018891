-- Per (registering call, arch), for the calls a JSON array :registration_ids names and the archs
-- a JSON array :archs names: whether the call adds its list on the arch, and the layer, file:line
-- and condition that decided it (ckkb.queries.evidence).
SELECT a.registration_id, a.arch, a.available, a.layer, a.file, a.line, a.condition
FROM availability a
WHERE a.registration_id IN (SELECT value FROM json_each(:registration_ids))
  AND a.arch IN (SELECT value FROM json_each(:archs))
