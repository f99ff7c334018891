-- One ckProfiler op by name.
SELECT * FROM profiler_ops WHERE name = :op;
