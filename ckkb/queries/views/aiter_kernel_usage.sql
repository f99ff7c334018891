-- Each aiter kernel-list entry with the number of tuned config rows that select it (by op's kernel list and kernelId).
CREATE VIEW aiter_kernel_usage AS
SELECT
  k.op AS kernel_dir, k.file, k.line, k.list_name, k.kernel_id, k.name,
  k.tile_m, k.tile_n, k.tile_k, k.pipeline, k.scheduler,
  rc.op AS op,
  (SELECT count(*) FROM aiter_config_rows r WHERE r.op = rc.op AND r.source_id = k.source_id AND r.kind = 'tuned' AND r.kernelId = k.kernel_id
     AND (r.kernelName IS NULL OR r.kernelName NOT LIKE '\_Z%' ESCAPE '\')) AS tuned_rows
FROM aiter_kernels k
JOIN aiter_runtime_configs rc ON rc.kernel_list_file = k.file AND rc.kernel_list = k.list_name
  AND rc.source_id = k.source_id
WHERE k.shadowed = 0;
