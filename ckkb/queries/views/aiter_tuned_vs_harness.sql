-- Each tuned aiter config row against the fastest harness baseline (torch candidates or the kernelId 0 incumbent, status ok) for the same arch and shape: speedup = baseline us / tuned us, NULL when never compared.
CREATE VIEW aiter_tuned_vs_harness AS
WITH base AS (
  SELECT arch, M, N, K, regime, min(us) AS us
  FROM harness_results
  WHERE us > 0 AND (status = 'ok' OR status IS NULL) AND (candidate NOT LIKE 'aiter:%' OR kernel_id = 0)
  GROUP BY arch, M, N, K, regime
)
SELECT
  r.file, r.line, r.op, r.arch, r.cu_num, r.M, r.N, r.K, r.kernelId, r.kernelName, r.us AS tuned_us,
  w.us AS warm_baseline_us, c.us AS cold_baseline_us,
  CASE WHEN w.us IS NOT NULL AND r.us > 0 THEN round(w.us / r.us, 4) END AS warm_speedup,
  CASE WHEN c.us IS NOT NULL AND r.us > 0 THEN round(c.us / r.us, 4) END AS cold_speedup
FROM aiter_config_rows r
LEFT JOIN base w ON w.arch = r.arch AND w.M = r.M AND w.N = r.N AND w.K = r.K AND w.regime = 'warm'
LEFT JOIN base c ON c.arch = r.arch AND c.M = r.M AND c.N = r.N AND c.K = r.K AND c.regime = 'cold'
WHERE r.kind = 'tuned';
