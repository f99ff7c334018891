-- Every argument of an op: positional ones in argv order, then the others as declared.
SELECT * FROM profiler_args
WHERE op = :op
ORDER BY position IS NULL, position, rowid;
