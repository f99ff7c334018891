-- Instances with their GEMM layout written the CK way (mk_kn, mk_nk, km_kn, km_nk: A row-major = mk, B row-major = kn), NULL for non-GEMM layouts.
CREATE VIEW ck_gemm_layouts AS
SELECT i.id AS instance_id,
       CASE WHEN i.a_layout IN ('Row', 'Col') AND i.b_layout IN ('Row', 'Col')
            THEN (CASE i.a_layout WHEN 'Row' THEN 'mk' ELSE 'km' END) || '_' ||
                 (CASE i.b_layout WHEN 'Row' THEN 'kn' ELSE 'nk' END)
       END AS layout
FROM instances i;
