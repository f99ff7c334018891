-- An op's quirks read from its source.
SELECT * FROM profiler_quirks WHERE op = :op;
