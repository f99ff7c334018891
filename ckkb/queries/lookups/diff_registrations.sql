-- The registering calls `ckkb diff` compares between two trees: those under :dir (empty = all)
-- whose list holds an instance of C++ type :dtype (A, B and C; empty = any) and GEMM layout
-- :layout (mk_kn, ...; empty = any).
SELECT r.dir, r.function, r.list_name, r.args, r.condition, r.file, r.line
FROM registrations r
WHERE (:dir = '' OR r.dir = :dir)
  AND ((:dtype = '' AND :layout = '') OR r.list_id IN (
        SELECT i.list_id FROM instances i JOIN ck_gemm_layouts g ON g.instance_id = i.id
        WHERE (:dtype = '' OR (i.a_dtype IN (:dtype, 'ck::' || :dtype)
                               AND i.b_dtype IN (:dtype, 'ck::' || :dtype)
                               AND i.c_dtype IN (:dtype, 'ck::' || :dtype)))
          AND (:layout = '' OR g.layout = :layout)))
ORDER BY r.dir, r.file, r.line
