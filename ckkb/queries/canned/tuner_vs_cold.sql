-- title: Tuner us against cold harness us
-- description: For each aiter tuned config row whose shape the harness timed cold on the same arch, the tuner's warm `us` beside the harness's cold `us` (mean over passes) per candidate; tuner_over_cold below 1 means the tuner was optimistic (seed §3c: re-time every winner cold before it ships). `arch` filters (empty = all).
-- params: arch
SELECT file, line, arch, cu_num, M, N, K, kernelId, kernelName, splitK, tuner_us,
       candidate, cold_us, timings, round(tuner_over_cold, 3) AS tuner_over_cold, tuner_optimism_pct, device, run_id
FROM harness_tuner_vs_cold
WHERE (:arch = '' OR arch = :arch)
ORDER BY tuner_over_cold, file, line, candidate;
