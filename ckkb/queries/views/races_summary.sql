-- Per race: instances timed (its Perf: results), instances registered for that arch, best, worst, spread (best/worst) and the winner.
-- best/worst are TFLOPS when the race's lines carry TFLOPS, else ms (unit says which); spread is
-- best/worst in TFLOPS, or worst_ms/best_ms for ms-only races (so it is >= 1 either way). The Best
-- line counts as a point too (a log may show only some Perf lines). winner: the instance the Best
-- line names, else the fastest Perf result.
CREATE VIEW races_summary AS
WITH pts AS (
    SELECT race_id, name, tflops, ms, 0 AS is_best FROM race_results WHERE ms IS NOT NULL
    UNION ALL
    SELECT id, best_name, best_tflops, best_ms, 1 FROM races WHERE best_ms IS NOT NULL
),
agg AS (
    SELECT race_id, max(tflops) AS best_tflops, min(tflops) AS worst_tflops, min(ms) AS best_ms, max(ms) AS worst_ms,
           count(tflops) AS n_tflops
    FROM pts GROUP BY race_id
),
timed AS (
    SELECT race_id, count(*) AS timed,
           sum(CASE WHEN supported = 0 THEN 1 ELSE 0 END) AS unsupported,
           sum(CASE WHEN verified = 0 THEN 1 ELSE 0 END) AS failed_verification
    FROM race_results GROUP BY race_id
)
SELECT
    r.id, r.op, r.dtype, r.layout, r.M, r.N, r.K, r.arch, r.gpu, r.status,
    coalesce((SELECT count(*) FROM race_results x WHERE x.race_id = r.id AND x.ms IS NOT NULL), 0) AS timed,
    rr.registered,
    CASE WHEN a.n_tflops > 0 THEN a.best_tflops ELSE a.best_ms END AS best,
    CASE WHEN a.n_tflops > 0 THEN a.worst_tflops ELSE a.worst_ms END AS worst,
    CASE
        WHEN a.n_tflops > 0 AND a.worst_tflops > 0 THEN round(a.best_tflops / a.worst_tflops, 4)
        WHEN a.n_tflops = 0 AND a.best_ms > 0 THEN round(a.worst_ms / a.best_ms, 4)
    END AS spread,
    CASE WHEN a.n_tflops > 0 THEN 'TFLOPS' WHEN a.best_ms IS NOT NULL THEN 'ms' END AS unit,
    coalesce(
        r.best_name,
        (SELECT p.name FROM race_results p WHERE p.race_id = r.id AND p.ms IS NOT NULL
         ORDER BY p.tflops IS NULL, p.tflops DESC, p.ms ASC, p.id LIMIT 1)
    ) AS winner,
    coalesce(t.unsupported, 0) AS unsupported,
    coalesce(t.failed_verification, 0) AS failed_verification,
    r.source_file, r.started_at
FROM races r
LEFT JOIN agg a ON a.race_id = r.id
LEFT JOIN timed t ON t.race_id = r.id
-- joined, not a correlated subquery: races_registered is an aggregate view, computed once this way
LEFT JOIN races_registered rr ON rr.race_id = r.id;
