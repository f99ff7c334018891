-- title: Instance pool of a directory on an arch
-- description: Active instances under gpu/`dir` that at least one add function registers on `arch`, with, side by side, how many registering calls add each one on every arch the tree builds (`per_arch`, a JSON object keyed by arch, in the tree's order).
-- params: dir, arch
-- Counted per list first (every entry of a list is added by the same calls): the same numbers as
-- summing ck_instance_availability per instance, at a fraction of the rows. An entry that no #if
-- inside its list drops (no instance_gates row) has its list's counts, so its `per_arch` object is
-- its list's, built once per list; only the few gated entries get their own. The archs are the
-- tree's own (the availability rows the build wrote for the targets its CMake names), never a
-- fixed list. Each object is built from rows ordered by arch, so its keys follow the tree.
WITH per_list AS (
    SELECT r.list_id, a.arch, sum(a.available) AS n
    FROM registrations r
    JOIN availability a ON a.registration_id = r.id
    WHERE r.list_id IN (SELECT id FROM instance_lists WHERE dir = :dir)
    GROUP BY r.list_id, a.arch
),
list_json AS (
    -- `here`: how many calls add the list on :arch
    SELECT list_id, json_group_object(arch, n) AS per_arch,
           sum(CASE WHEN arch = :arch THEN n ELSE 0 END) AS here
    FROM (SELECT * FROM per_list ORDER BY list_id, length(arch), arch)
    GROUP BY list_id
),
inst AS MATERIALIZED (
    -- the directory's active entries; `gated`: an #if on arch macros inside its list drops it
    -- somewhere (instance_gates), so its counts are its own, not its list's
    SELECT i.id, i.list_id,
           EXISTS (SELECT 1 FROM instance_gates g WHERE g.instance_id = i.id) AS gated
    FROM instances i
    WHERE i.dir = :dir AND i.status = 'active'
),
own AS (
    SELECT c.id AS instance_id, pl.arch,
           CASE WHEN EXISTS (SELECT 1 FROM instance_gates g
                             WHERE g.instance_id = c.id AND g.arch = pl.arch) THEN 0
                ELSE pl.n END AS n
    FROM inst c
    JOIN per_list pl ON pl.list_id = c.list_id
    WHERE c.gated
),
pooled AS (
    SELECT c.id AS instance_id, lj.per_arch
    FROM inst c
    JOIN list_json lj ON lj.list_id = c.list_id
    WHERE NOT c.gated AND lj.here > 0
    UNION ALL
    SELECT instance_id, json_group_object(arch, n)
    FROM (SELECT * FROM own ORDER BY instance_id, length(arch), arch)
    GROUP BY instance_id
    HAVING sum(CASE WHEN arch = :arch THEN n ELSE 0 END) > 0
)
SELECT i.id AS instance_id, p.per_arch, g.layout,
       i.pipeline, i.scheduler, i.block_size, i.list_name, i.template, i.file, i.line,
       i.tile_m, i.tile_n, i.tile_k
FROM pooled p
JOIN instances i ON i.id = p.instance_id
LEFT JOIN ck_gemm_layouts g ON g.instance_id = i.id
ORDER BY i.list_name, i.line;
