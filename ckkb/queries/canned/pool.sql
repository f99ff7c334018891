-- title: Instance pool of a directory on an arch
-- description: Active instances under gpu/`dir` that at least one add function registers on `arch`, with, side by side, how many registering calls add each one on every arch the tree builds (`per_arch`, a JSON object keyed by arch, in the tree's order).
-- params: dir, arch
-- Counted per list first (every entry of a list is added by the same calls), then spread over the
-- list's active entries: the same numbers as summing ck_instance_availability per instance, at a
-- fraction of the rows. The archs are the tree's own (the availability rows the build wrote for
-- the targets its CMake names), never a fixed list.
WITH per_list AS (
    SELECT r.list_id, a.arch, sum(a.available) AS n
    FROM registrations r
    JOIN availability a ON a.registration_id = r.id
    WHERE r.list_id IN (SELECT id FROM instance_lists WHERE dir = :dir)
    GROUP BY r.list_id, a.arch
),
per AS (
    -- an entry an #if on arch macros inside its list drops (instance_gates) counts 0 there
    SELECT i.id AS instance_id, pl.arch,
           CASE WHEN EXISTS (SELECT 1 FROM instance_gates g
                             WHERE g.instance_id = i.id AND g.arch = pl.arch) THEN 0
                ELSE pl.n END AS n
    FROM instances i
    JOIN per_list pl ON pl.list_id = i.list_id
    WHERE i.dir = :dir AND i.status = 'active'
),
per_arch AS (
    -- one row per (instance, arch) already; ordered so that per_arch's keys follow the tree
    SELECT instance_id, arch, n FROM per ORDER BY instance_id, length(arch), arch
)
SELECT i.id AS instance_id, json_group_object(p.arch, p.n) AS per_arch, g.layout,
       i.pipeline, i.scheduler, i.block_size, i.list_name, i.template, i.file, i.line,
       i.tile_m, i.tile_n, i.tile_k
FROM instances i
JOIN per_arch p ON p.instance_id = i.id
LEFT JOIN ck_gemm_layouts g ON g.instance_id = i.id
GROUP BY i.id
HAVING sum(CASE WHEN p.arch = :arch THEN p.n ELSE 0 END) > 0
ORDER BY i.list_name, i.line;
