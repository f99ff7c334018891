-- An op's positional arguments, in argv order.
SELECT * FROM profiler_args
WHERE op = :op AND position IS NOT NULL
ORDER BY position;
