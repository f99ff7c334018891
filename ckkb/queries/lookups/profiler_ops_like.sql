-- Up to 8 op names containing :fragment (suggestions for an unknown op).
SELECT name FROM profiler_ops WHERE name LIKE '%' || :fragment || '%' ORDER BY name LIMIT 8;
