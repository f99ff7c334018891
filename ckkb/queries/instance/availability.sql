-- Per-arch availability of a set of registrations (:ids is a JSON array of registration ids) for
-- instance :instance_id: an arch where an #if on arch macros inside the instance's list drops it
-- (instance_gates) is unavailable there, the preprocessor layer its evidence (as in the view
-- ck_instance_availability), unless the build layer removed the registration first.
SELECT a.registration_id, a.arch,
       CASE WHEN g.instance_id IS NULL THEN a.available ELSE 0 END AS available,
       CASE WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build' THEN 'preprocessor'
            ELSE a.layer END AS layer,
       CASE WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build' THEN g.file
            ELSE a.file END AS file,
       CASE WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build' THEN g.line
            ELSE a.line END AS line,
       CASE WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build' THEN g.condition
            ELSE a.condition END AS condition
FROM availability a
LEFT JOIN instance_gates g ON g.instance_id = :instance_id AND g.arch = a.arch
WHERE a.registration_id IN (SELECT value FROM json_each(:ids))
ORDER BY a.arch, a.registration_id
