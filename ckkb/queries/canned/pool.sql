-- title: Instance pool of a directory on an arch
-- description: Active instances under gpu/`dir` that at least one add function registers on `arch`, with, side by side, how many registering calls add each one on every arch ckkb evaluates.
-- params: dir, arch
WITH per AS (
    SELECT instance_id, arch, sum(available) AS n
    FROM ck_instance_availability
    WHERE dir = :dir
    GROUP BY instance_id, arch
)
SELECT i.id AS instance_id, i.list_name, i.template, i.file, i.line, g.layout,
       i.tile_m, i.tile_n, i.tile_k, i.block_size, i.pipeline, i.scheduler,
       sum(CASE WHEN p.arch = 'gfx908' THEN p.n ELSE 0 END) AS gfx908,
       sum(CASE WHEN p.arch = 'gfx90a' THEN p.n ELSE 0 END) AS gfx90a,
       sum(CASE WHEN p.arch = 'gfx942' THEN p.n ELSE 0 END) AS gfx942,
       sum(CASE WHEN p.arch = 'gfx950' THEN p.n ELSE 0 END) AS gfx950,
       sum(CASE WHEN p.arch = 'gfx1100' THEN p.n ELSE 0 END) AS gfx1100,
       sum(CASE WHEN p.arch = 'gfx1101' THEN p.n ELSE 0 END) AS gfx1101,
       sum(CASE WHEN p.arch = 'gfx1200' THEN p.n ELSE 0 END) AS gfx1200,
       sum(CASE WHEN p.arch = 'gfx1201' THEN p.n ELSE 0 END) AS gfx1201
FROM instances i
JOIN per p ON p.instance_id = i.id
LEFT JOIN ck_gemm_layouts g ON g.instance_id = i.id
GROUP BY i.id
HAVING sum(CASE WHEN p.arch = :arch THEN p.n ELSE 0 END) > 0
ORDER BY i.list_name, i.line;
