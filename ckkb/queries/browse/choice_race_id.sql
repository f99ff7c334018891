-- Races, with a label (race_spread's race_id dropdown).
SELECT id AS value,
       id || ': ' || trim(coalesce(op, '') || ' ' || coalesce(dtype, '') || ' ' ||
       coalesce(M || 'x' || N || 'x' || K, '') || ' ' || coalesce(arch, '')) AS label
FROM races ORDER BY id
