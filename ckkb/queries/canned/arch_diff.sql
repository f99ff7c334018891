-- title: Instances on one arch but not the other
-- description: Active instances that some add function registers on exactly one of `arch_a` and `arch_b`, with the side they are on and, for the other side, the first evidence that removes them.
-- params: arch_a, arch_b
-- Only instances with a registering call whose availability differs between the two archs can
-- differ themselves, so those are found first (a few hundred calls instead of every instance).
WITH diff_calls AS (
    SELECT registration_id FROM availability
    WHERE arch IN (:arch_a, :arch_b)
    GROUP BY registration_id
    HAVING min(available) != max(available)
),
candidates AS (
    SELECT DISTINCT i.id
    FROM diff_calls d
    JOIN registrations r ON r.id = d.registration_id
    JOIN instances i ON i.list_id = r.list_id
    UNION
    SELECT instance_id FROM instance_gates WHERE arch IN (:arch_a, :arch_b)
),
per AS (
    SELECT instance_id,
           max(CASE WHEN arch = :arch_a THEN available END) AS on_a,
           max(CASE WHEN arch = :arch_b THEN available END) AS on_b
    FROM ck_instance_availability
    WHERE arch IN (:arch_a, :arch_b) AND instance_id IN (SELECT id FROM candidates)
    GROUP BY instance_id
)
SELECT i.id AS instance_id, i.dir, i.list_name, i.template, i.file, i.line, i.tile_m, i.tile_n, i.tile_k,
       CASE WHEN p.on_a = 1 THEN :arch_a ELSE :arch_b END AS present_on,
       CASE WHEN p.on_a = 1 THEN :arch_b ELSE :arch_a END AS absent_on,
       (SELECT v.layer || ' ' || v.evidence_file || ':' || v.evidence_line || ' ' || coalesce(v.evidence, '')
        FROM ck_instance_availability v
        WHERE v.instance_id = i.id AND v.arch = (CASE WHEN p.on_a = 1 THEN :arch_b ELSE :arch_a END)
        ORDER BY v.registration_file, v.registration_line LIMIT 1) AS evidence
FROM per p
JOIN instances i ON i.id = p.instance_id
WHERE coalesce(p.on_a, 0) != coalesce(p.on_b, 0) AND i.status = 'active'
ORDER BY i.dir, i.list_name, i.line;
