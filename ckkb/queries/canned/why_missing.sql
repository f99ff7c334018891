-- title: Why is this tile missing?
-- description: Instances whose MPerBlock x NPerBlock x KPerBlock is `tile` (e.g. 256x224x64; empty = any), and for each registering call whether it adds the instance on `arch`, with the evidence (layer, file, line, condition) and the list's own comment. Instances no add function registers appear once with layer 'registration'.
-- params: tile, arch
SELECT i.id AS instance_id, i.template, i.dir, i.file, i.line, i.list_name, l.comment AS list_comment,
       i.status, i.reason, i.tile_m, i.tile_n, i.tile_k,
       v.registration_id, v.function, v.registration_file, v.registration_line, v.registration_args,
       coalesce(v.available, 0) AS available,
       CASE WHEN v.registration_id IS NULL
            THEN (CASE WHEN i.status != 'active' THEN 'commented_out' ELSE 'registration' END)
            ELSE v.layer END AS layer,
       CASE WHEN v.registration_id IS NULL THEN i.file ELSE v.evidence_file END AS evidence_file,
       CASE WHEN v.registration_id IS NULL THEN i.line ELSE v.evidence_line END AS evidence_line,
       CASE WHEN v.registration_id IS NULL
            THEN (CASE WHEN i.status != 'active' THEN i.reason ELSE 'no add_*_instances function registers ' || i.list_name END)
            ELSE v.evidence END AS evidence
FROM instances i
LEFT JOIN instance_lists l ON l.id = i.list_id
LEFT JOIN ck_instance_availability v ON v.instance_id = i.id AND v.arch = :arch
WHERE (:tile = '' OR (i.tile_m || 'x' || i.tile_n || 'x' || i.tile_k) = :tile)
ORDER BY i.dir, i.file, i.line, v.registration_file, v.registration_line;
