-- Per (instance, registering call, arch): whether that call adds the instance on the arch, and if not the first layer that removes it (commented_out for an entry that is commented out in its list).
CREATE VIEW ck_instance_availability AS
SELECT i.id AS instance_id,
       r.id AS registration_id,
       a.arch,
       CASE WHEN i.status = 'active' AND a.available = 1 THEN 1 ELSE 0 END AS available,
       CASE WHEN i.status != 'active' THEN 'commented_out' ELSE a.layer END AS layer,
       CASE WHEN i.status != 'active' THEN i.file ELSE a.file END AS evidence_file,
       CASE WHEN i.status != 'active' THEN i.line ELSE a.line END AS evidence_line,
       CASE WHEN i.status != 'active' THEN i.reason ELSE a.condition END AS evidence,
       i.dir, i.list_id, i.list_name, i.template, i.status,
       r.function, r.file AS registration_file, r.line AS registration_line, r.args AS registration_args
FROM instances i
JOIN registrations r ON r.list_id = i.list_id
JOIN availability a ON a.registration_id = r.id;
