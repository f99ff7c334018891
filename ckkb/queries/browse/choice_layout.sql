-- GEMM layouts the instances have (version_diff's `layout` dropdown), in the vocabulary's order.
SELECT layout AS value, count(*) AS n FROM ck_gemm_layouts
WHERE layout IS NOT NULL
GROUP BY layout
ORDER BY CASE layout WHEN 'mk_kn' THEN 0 WHEN 'mk_nk' THEN 1 WHEN 'km_kn' THEN 2 ELSE 3 END, layout
