-- title: Pool size per arch and layout
-- description: Available (instance, registering call) pairs under gpu/`dir` whose A, B and C data types are all `dtype` (a C++ type such as bhalf_t; empty = any), counted per arch and GEMM layout (mk_kn, mk_nk, km_kn, km_nk).
-- params: dir, dtype
-- The same sums as over ck_instance_availability (one row per instance, registering call and arch),
-- counted per list first: every entry of a list is added by the same calls, so an entry's pairs
-- on an arch are its list's calls there, and its available pairs its list's, unless it is
-- commented out or an #if inside its list drops it there (instance_gates).
WITH inst AS MATERIALIZED (
    SELECT i.id, i.list_id, i.status = 'active' AS active, g.layout
    FROM instances i
    JOIN ck_gemm_layouts g ON g.instance_id = i.id
    WHERE i.dir = :dir
      AND (:dtype = '' OR (i.a_dtype IN (:dtype, 'ck::' || :dtype)
                           AND i.b_dtype IN (:dtype, 'ck::' || :dtype)
                           AND i.c_dtype IN (:dtype, 'ck::' || :dtype)))
      AND g.layout IS NOT NULL
),
per_list AS MATERIALIZED (
    SELECT r.list_id, a.arch, sum(a.available) AS n, count(*) AS calls
    FROM registrations r
    JOIN availability a ON a.registration_id = r.id
    WHERE r.list_id IN (SELECT list_id FROM inst)
    GROUP BY r.list_id, a.arch
),
per AS (
    SELECT c.id, c.layout, pl.arch, pl.calls,
           CASE WHEN c.active AND NOT EXISTS (SELECT 1 FROM instance_gates g
                                              WHERE g.instance_id = c.id AND g.arch = pl.arch)
                THEN pl.n ELSE 0 END AS n
    FROM inst c
    JOIN per_list pl ON pl.list_id = c.list_id
)
SELECT arch, layout, sum(n) AS available, sum(calls) AS pairs,
       count(DISTINCT CASE WHEN n > 0 THEN id END) AS instances
FROM per
GROUP BY arch, layout
ORDER BY arch, layout;
