-- An aiter tuned config row's `us` (taken warm by its tuner) against the harness's cold `us` for the same shape on the same arch (mean over passes): tuner_over_cold below 1 means the tuner figure is optimistic.
CREATE VIEW harness_tuner_vs_cold AS
WITH cold AS (
    SELECT arch, device, M, N, K, dtype, candidate, kernel_id,
           avg(us) AS cold_us, min(us) AS cold_min_us, max(us) AS cold_max_us,
           count(*) AS timings, max(run_id) AS run_id
    FROM harness_results
    WHERE regime = 'cold' AND status = 'ok' AND us > 0
    GROUP BY arch, device, M, N, K, dtype, candidate, kernel_id
)
SELECT r.file, r.line, r.arch, r.cu_num, r.M, r.N, r.K, r.kernelId, r.kernelName, r.splitK,
       r.us AS tuner_us,
       c.device, c.dtype, c.candidate, c.kernel_id AS candidate_kernel_id,
       c.cold_us, c.cold_min_us, c.cold_max_us, c.timings, c.run_id,
       r.us / c.cold_us AS tuner_over_cold,
       round(100.0 * (c.cold_us - r.us) / c.cold_us, 2) AS tuner_optimism_pct
FROM aiter_config_rows r
JOIN cold c ON c.arch = r.arch AND c.M = r.M AND c.N = r.N AND c.K = r.K
WHERE r.kind = 'tuned' AND r.us > 0
  AND ((c.dtype = 'fp8' AND r.file LIKE '%a8w8%')
       OR (c.dtype = 'bf16' AND r.file LIKE '%bf16%'))
  AND (c.kernel_id IS NULL OR c.kernel_id = 0 OR c.kernel_id = r.kernelId);
