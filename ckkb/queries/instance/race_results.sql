-- Race results by id (:ids is a JSON array), with their race's shape, fastest first.
SELECT rr.race_id, rr.name, rr.ms, rr.tflops, rr.gbps, rr.supported, rr.verified,
       r.op, r.dtype, r.layout, r.M, r.N, r.K, r.arch, r.gpu
FROM race_results rr
LEFT JOIN races r ON r.id = rr.race_id
WHERE rr.id IN (SELECT value FROM json_each(:ids))
ORDER BY rr.tflops IS NULL, rr.tflops DESC, rr.id
