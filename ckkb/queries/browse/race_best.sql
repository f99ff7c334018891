-- One race's Best line and device (the chart's winner bar when no Perf: line carries it, the peak).
SELECT id, best_name, best_tflops, best_ms, best_gbps, gpu, arch, dtype, M, N, K
FROM races
WHERE id = :race
