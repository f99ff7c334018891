-- Per (instance, registering call, arch): whether that call adds the instance on the arch, and if not the first layer that removes it (commented_out for an entry that is commented out in its list; preprocessor for an entry an #if on arch macros inside its list drops, instance_gates).
CREATE VIEW ck_instance_availability AS
SELECT i.id AS instance_id,
       r.id AS registration_id,
       a.arch,
       CASE WHEN i.status = 'active' AND a.available = 1 AND g.instance_id IS NULL THEN 1 ELSE 0 END
           AS available,
       CASE WHEN i.status != 'active' THEN 'commented_out'
            WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build' THEN 'preprocessor'
            ELSE a.layer END AS layer,
       CASE WHEN i.status != 'active' THEN i.file
            WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build' THEN g.file
            ELSE a.file END AS evidence_file,
       CASE WHEN i.status != 'active' THEN i.line
            WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build' THEN g.line
            ELSE a.line END AS evidence_line,
       CASE WHEN i.status != 'active' THEN i.reason
            WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build' THEN g.condition
            ELSE a.condition END AS evidence,
       i.dir, i.list_id, i.list_name, i.template, i.status,
       r.function, r.file AS registration_file, r.line AS registration_line, r.args AS registration_args
FROM instances i
JOIN registrations r ON r.list_id = i.list_id AND r.source_id = i.source_id
JOIN availability a ON a.registration_id = r.id AND a.source_id = r.source_id
LEFT JOIN instance_gates g ON g.instance_id = i.id AND g.arch = a.arch AND g.source_id = i.source_id;
