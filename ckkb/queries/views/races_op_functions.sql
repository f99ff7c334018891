-- Per ckProfiler op: the factory add functions serving the device-op interfaces it races (profiler_ops.interfaces joined to factories), i.e. the instance pool a race draws from.
CREATE VIEW races_op_functions AS
SELECT DISTINCT o.name AS op, j.value AS interface, f.function, f.dtypes, f.layouts, f.file
FROM profiler_ops o, json_each(o.interfaces) j
JOIN factories f ON f.interface = j.value AND f.source_id = o.source_id;
