-- Every named race result with its race's data type (what `ckkb locate --dtype` is given).
SELECT rr.id, rr.name, r.dtype
FROM race_results rr
LEFT JOIN races r ON r.id = rr.race_id
WHERE rr.name IS NOT NULL AND rr.name != ''
ORDER BY rr.id
