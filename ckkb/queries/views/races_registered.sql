-- Instances registered in the knowledge base for each race's op, data type and layout on the race's arch (NULL when it cannot be determined).
-- Derivation: the op's device-op interfaces (profiler_ops.interfaces, read from its profile_*_impl.hpp)
-- -> factory declarations of that interface whose first data type (read through ckkb's one
-- vocabulary, table dtype_spellings) and A/B layouts match the race (factories) -> their add
-- functions' registrations (registrations) that are available on the race's arch (availability)
-- -> the active entries of the instance lists they add (instance_lists), less the entries an #if on arch macros inside the list drops on that arch (instance_gates).
-- NULL when the race has no arch or dtype, the op has no interface, or no factory matches.
CREATE VIEW races_registered AS
WITH race_if AS (
    SELECT r.id AS race_id, r.arch, r.dtype, r.layout, j.value AS interface, o.source_id
    FROM races r
    JOIN profiler_ops o ON o.name = r.op, json_each(o.interfaces) j
    WHERE r.arch IS NOT NULL AND r.dtype IS NOT NULL
),
fns AS (
    SELECT DISTINCT ri.race_id, ri.arch, f.function, f.source_id
    FROM race_if ri
    -- `interface` or `interface<...>`; a range, not LIKE, so the index on factories.interface is used
    JOIN factories f ON (f.interface = ri.interface OR (f.interface > ri.interface || '<' AND f.interface < ri.interface || '='))
        AND f.source_id = ri.source_id
    WHERE EXISTS (
        SELECT 1 FROM dtype_spellings dt
        WHERE dt.label = ri.dtype
          AND (json_extract(f.dtypes, '$[0]') = dt.spelling OR json_extract(f.dtypes, '$[0]') LIKE '%::' || dt.spelling)
    )
      AND (
        ri.layout IS NULL OR ri.layout NOT GLOB '[mk][mk]_[nk][nk]'
        OR (
            json_extract(f.layouts, '$[0]') LIKE CASE substr(ri.layout, 1, 2) WHEN 'mk' THEN '%Row%' ELSE '%Col%' END
            AND json_extract(f.layouts, '$[1]') LIKE CASE substr(ri.layout, 4, 2) WHEN 'kn' THEN '%Row%' ELSE '%Col%' END
        )
      )
)
SELECT fns.race_id AS race_id,
       sum(l.entries - (SELECT count(*) FROM instances i
                        JOIN instance_gates ig ON ig.instance_id = i.id AND ig.arch = fns.arch
                            AND ig.source_id = i.source_id
                        WHERE i.list_id = l.id AND i.source_id = l.source_id AND i.status = 'active')) AS registered,
       count(DISTINCT g.id) AS registrations
FROM fns
JOIN registrations g ON g.function = fns.function AND g.source_id = fns.source_id
JOIN availability a ON a.registration_id = g.id AND a.source_id = g.source_id AND a.arch = fns.arch
    AND a.available = 1
JOIN instance_lists l ON l.id = g.list_id AND l.source_id = g.source_id
GROUP BY fns.race_id;
