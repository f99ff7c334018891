-- The gates `ckkb diff` compares between two trees (empty :dir = every directory).
SELECT kind, arch, effect, dir, function, condition, has_else, file, line
FROM gates
WHERE :dir = '' OR dir = :dir
ORDER BY dir, file, line
