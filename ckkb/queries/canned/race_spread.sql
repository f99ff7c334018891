-- title: Race spread
-- description: Per race: instances timed vs registered for its arch, best, worst, spread (best/worst) and the winner. best/worst are TFLOPS, or ms for races whose lines have no TFLOPS (unit). Races of one shape (op, dtype, layout, M, N, K, arch) are repeats: `repeats` counts them, `repeat_spread` is the largest over the smallest of their best values and `first_repeat` is the first of them.
-- params: race_id
SELECT id, op, dtype, layout, M, N, K, arch, timed, registered, best, worst, spread, unit, winner,
       repeats, repeat_spread, first_repeat
FROM (
    SELECT s.*,
           count(*) OVER shape AS repeats,
           min(id) OVER shape AS first_repeat,
           round(max(best) OVER shape / nullif(min(best) OVER shape, 0), 4) AS repeat_spread
    FROM races_summary s
    -- a race whose shape the log does not give (M unknown) repeats nothing
    WINDOW shape AS (PARTITION BY op, dtype, layout, M, N, K, arch, unit,
                     CASE WHEN M IS NULL THEN id END)
)
WHERE (:race_id IS NULL OR :race_id = '' OR id = :race_id)
ORDER BY id;
