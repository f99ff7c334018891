-- title: Race spread
-- description: Per race: instances timed vs registered for its arch, best, worst, spread (best/worst) and the winner. best/worst are TFLOPS, or ms for races whose lines have no TFLOPS (unit).
-- params: race_id
SELECT id, op, dtype, layout, M, N, K, arch, timed, registered, best, worst, spread, unit, winner
FROM races_summary
WHERE (:race_id IS NULL OR :race_id = '' OR id = :race_id)
ORDER BY id;
