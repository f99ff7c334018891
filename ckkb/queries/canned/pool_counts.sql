-- title: Pool size per arch and layout
-- description: Available (instance, registering call) pairs under gpu/`dir` whose A, B and C data types are all `dtype` (a C++ type such as bhalf_t; empty = any), counted per arch and GEMM layout (mk_kn, mk_nk, km_kn, km_nk).
-- params: dir, dtype
SELECT v.arch, g.layout, sum(v.available) AS available, count(*) AS pairs,
       count(DISTINCT CASE WHEN v.available = 1 THEN v.instance_id END) AS instances
FROM ck_instance_availability v
JOIN instances i ON i.id = v.instance_id
JOIN ck_gemm_layouts g ON g.instance_id = i.id
WHERE v.dir = :dir
  AND (:dtype = '' OR (i.a_dtype IN (:dtype, 'ck::' || :dtype) AND i.b_dtype IN (:dtype, 'ck::' || :dtype)
                       AND i.c_dtype IN (:dtype, 'ck::' || :dtype)))
  AND g.layout IS NOT NULL
GROUP BY v.arch, g.layout
ORDER BY v.arch, g.layout;
