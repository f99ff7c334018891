-- The timed results of one race (its Perf: lines), for the race chart.
SELECT id, name, tflops, ms, gbps
FROM race_results
WHERE race_id = :race AND ms IS NOT NULL
ORDER BY tflops IS NULL, tflops DESC, ms, id
