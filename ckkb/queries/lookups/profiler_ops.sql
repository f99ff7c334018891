-- Every ckProfiler op with the number of positional arguments its legend has.
SELECT o.*,
       (SELECT count(*) FROM profiler_args a
         WHERE a.op = o.name AND a.position IS NOT NULL) AS positional_args
FROM profiler_ops o
ORDER BY o.name;
