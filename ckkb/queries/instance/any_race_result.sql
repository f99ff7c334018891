-- Whether any race result is stored at all (the explain page says so when none is).
SELECT 1 AS x FROM race_results LIMIT 1
