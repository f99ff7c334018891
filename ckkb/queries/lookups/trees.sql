-- The source trees a knowledge base holds, in source-id order (the first of each kind is the default).
SELECT id, name, kind, path, version, wheel_version, [commit], files, built,
       coalesce(rows_of, id) AS rows
FROM main.sources
WHERE kind IN ('ck', 'aiter')
ORDER BY id
