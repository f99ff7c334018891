-- The ckProfiler ops `ckkb diff` compares between two trees, by name.
SELECT name, description, function, gemm_family, usage, legend_kind, positional_args,
       argc_allowed, impl_headers, interfaces, file, line
FROM profiler_ops
ORDER BY name
