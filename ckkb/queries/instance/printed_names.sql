-- The names an instance prints (GetTypeString(), as ckProfiler shows them), one per distinct text;
-- where the printed form is not stored, its key (the name without spaces, '*' for a value
-- computed at run time).
SELECT DISTINCT coalesce(nullif(printed_name, ''), key) AS printed_name FROM instance_keys
WHERE instance_id = :id AND coalesce(nullif(printed_name, ''), key) IS NOT NULL
ORDER BY 1
