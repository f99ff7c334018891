-- title: Why is this tile missing?
-- description: Instances whose MPerBlock x NPerBlock x KPerBlock is `tile` (e.g. 256x224x64; empty = any), and for each registering call whether it adds the instance on `arch`, with the evidence (layer, file, line, condition) and the list's own comment. Instances no add function registers appear once with layer 'registration'.
-- params: tile, arch
-- `tile` "MxNxK" split into integers so the (tile_m, tile_n, tile_k) index finds the matches.
WITH t(m, n, k) AS (
    SELECT CAST(:tile AS INTEGER),
           CAST(substr(:tile, instr(:tile, 'x') + 1) AS INTEGER),
           CAST(substr(substr(:tile, instr(:tile, 'x') + 1), instr(substr(:tile, instr(:tile, 'x') + 1), 'x') + 1) AS INTEGER)
),
wanted(id) AS (
    SELECT i.id FROM instances i, t
    WHERE :tile != '' AND i.tile_m = t.m AND i.tile_n = t.n AND i.tile_k = t.k
      AND (i.tile_m || 'x' || i.tile_n || 'x' || i.tile_k) = :tile
    UNION ALL
    SELECT id FROM instances WHERE :tile = ''
)
SELECT i.id AS instance_id, i.template, i.dir, i.file, i.line, i.list_name, l.comment AS list_comment,
       i.status, i.reason, i.tile_m, i.tile_n, i.tile_k,
       r.id AS registration_id, r.function, r.file AS registration_file, r.line AS registration_line,
       r.args AS registration_args,
       CASE WHEN i.status = 'active' AND a.available = 1 AND g.instance_id IS NULL THEN 1 ELSE 0 END
           AS available,
       CASE WHEN i.status != 'active' THEN 'commented_out'
            WHEN r.id IS NULL THEN 'registration'
            WHEN (g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build') THEN 'preprocessor'
            ELSE a.layer END AS layer,
       CASE WHEN i.status != 'active' OR r.id IS NULL THEN i.file
            WHEN (g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build') THEN g.file ELSE a.file END AS evidence_file,
       CASE WHEN i.status != 'active' OR r.id IS NULL THEN i.line
            WHEN (g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build') THEN g.line ELSE a.line END AS evidence_line,
       CASE WHEN i.status != 'active' THEN i.reason
            WHEN r.id IS NULL THEN 'no add_*_instances function registers ' || i.list_name
            WHEN (g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build') THEN g.condition
            ELSE a.condition END AS evidence
-- Base tables, not the ck_instance_availability view: SQLite cannot flatten a join view on the
-- right of a LEFT JOIN and would materialise all of it (250 ms instead of a few ms). For the same
-- reason the registrations that have an availability row on `arch` are joined one by one (the
-- EXISTS keeps the others out, as an inner join of the two would), not as a parenthesised join,
-- which SQLite materialises whole with an automatic index on every run (10 ms of a 0.5 ms query).
FROM wanted w
JOIN instances i ON i.id = w.id
LEFT JOIN instance_lists l ON l.id = i.list_id
LEFT JOIN registrations r ON r.list_id = i.list_id
      AND EXISTS (SELECT 1 FROM availability x WHERE x.registration_id = r.id AND x.arch = :arch)
LEFT JOIN availability a ON a.registration_id = r.id AND a.arch = :arch
LEFT JOIN instance_gates g ON g.instance_id = i.id AND g.arch = :arch
ORDER BY i.dir, i.file, i.line, r.file, r.line;
