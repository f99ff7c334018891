-- Warm vs cold per shape, candidate and pass of a harness run: cold_over_warm above 1 means the warm (tuner-style, one operand set) figure is optimistic by warm_optimism_pct.
CREATE VIEW harness_warm_cold AS
SELECT w.run_id, w.device, w.arch, w.M, w.N, w.K, w.dtype, w.candidate, w.layout, w.pass_no,
       CASE WHEN w.M <= 64 THEN 'small_m' ELSE 'large_m' END AS m_class,
       w.us AS warm_us,
       c.us AS cold_us,
       c.us / w.us AS cold_over_warm,
       round(100.0 * (c.us - w.us) / c.us, 2) AS warm_optimism_pct,
       w.method AS warm_method,
       c.method AS cold_method,
       c.bound,
       c.pct_of_bound AS cold_pct_of_bound,
       c.tflops AS cold_tflops,
       c.gbps AS cold_gbps,
       json_extract(c.extra, '$.buffers') AS cold_buffers,
       json_extract(c.extra, '$.buffer_bytes') AS cold_buffer_bytes,
       w.spread AS warm_spread,
       c.spread AS cold_spread,
       w.config,
       w.config_row
FROM harness_results w
JOIN harness_results c
  ON c.run_id = w.run_id AND c.M = w.M AND c.N = w.N AND c.K = w.K AND c.dtype = w.dtype
 AND c.candidate = w.candidate AND c.pass_no = w.pass_no AND c.regime = 'cold' AND c.status = 'ok'
WHERE w.regime = 'warm' AND w.status = 'ok' AND w.us > 0;
