-- title: Fleet spread
-- description: The same shape and instance timed on several GPUs of one arch (bundles of
-- `ckkb race` or `ckkb harness` run with --gpus or --scheduler): each GPU's time (us, the mean
-- of its passes) against the median of its group, the group's spread ((slowest - fastest) /
-- median) and `outlier` = 1 where the GPU is more than `slack` (a fraction, default 0.05) slower
-- than the median. One slow GPU in a node shows as one host and GPU flagged across many rows;
-- the chart above the rows counts the outlier rows per GPU.
-- params: arch?, slack?
WITH per_gpu AS (
    SELECT 'harness' AS source, arch, M, N, K,
           dtype || ' ' || layout || ' ' || regime AS variant,
           candidate AS instance,
           json_extract(extra, '$.provenance.hostname') AS host,
           coalesce(json_extract(extra, '$.provenance.uuid'),
                    json_extract(extra, '$.provenance.pci_bus'),
                    json_extract(extra, '$.provenance.gpu_index')) AS gpu,
           json_extract(extra, '$.provenance.gpu_index') AS gpu_index,
           avg(us) AS us, count(*) AS timings
    FROM harness_results
    WHERE status = 'ok' AND us > 0 AND json_extract(extra, '$.provenance') IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
    UNION ALL
    SELECT 'race', r.arch, r.M, r.N, r.K,
           coalesce(r.op, '') || ' ' || coalesce(r.dtype, '') || ' ' || coalesce(r.layout, ''),
           x.name,
           json_extract(r.extra, '$.provenance.hostname'),
           coalesce(json_extract(r.extra, '$.provenance.uuid'),
                    json_extract(r.extra, '$.provenance.pci_bus'),
                    json_extract(r.extra, '$.provenance.gpu_index')),
           json_extract(r.extra, '$.provenance.gpu_index'),
           avg(x.ms) * 1000.0, count(*)
    FROM race_results x JOIN races r ON r.id = x.race_id
    WHERE x.ms > 0 AND json_extract(r.extra, '$.provenance') IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
),
ranked AS (
    SELECT *,
           count(*) OVER grp AS gpus,
           row_number() OVER (PARTITION BY source, arch, M, N, K, variant, instance ORDER BY us)
               AS rk,
           min(us) OVER grp AS fastest,
           max(us) OVER grp AS slowest
    FROM per_gpu
    WINDOW grp AS (PARTITION BY source, arch, M, N, K, variant, instance)
),
medians AS (
    SELECT source, arch, M, N, K, variant, instance, avg(us) AS median_us
    FROM ranked
    WHERE rk IN ((gpus + 1) / 2, (gpus + 2) / 2)
    GROUP BY source, arch, M, N, K, variant, instance
)
SELECT ranked.source, ranked.arch, ranked.M, ranked.N, ranked.K, ranked.variant,
       ranked.instance, host, gpu, gpu_index, round(us, 3) AS us, timings, gpus,
       round(median_us, 3) AS median_us,
       round(us / median_us, 4) AS ratio,
       round((slowest - fastest) / median_us, 4) AS spread,
       CASE WHEN us > median_us * (1 + coalesce(CAST(nullif(:slack, '') AS REAL), 0.05))
            THEN 1 ELSE 0 END AS outlier
FROM ranked JOIN medians
  ON medians.source = ranked.source AND medians.arch IS ranked.arch
 AND medians.M IS ranked.M AND medians.N IS ranked.N AND medians.K IS ranked.K
 AND medians.variant IS ranked.variant AND medians.instance = ranked.instance
WHERE gpus >= 2 AND (:arch IS NULL OR :arch = '' OR ranked.arch = :arch)
ORDER BY outlier DESC, spread DESC, ranked.source, ranked.arch, ranked.M, ranked.N, ranked.K,
         ranked.variant, ranked.instance, ratio DESC;
