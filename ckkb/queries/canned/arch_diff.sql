-- title: Instances on one arch but not the other
-- description: Active instances that some add function registers on exactly one of `arch_a` and `arch_b`, with the side they are on and, for the other side, the first evidence that removes them.
-- params: arch_a, arch_b
-- Availability is decided per list first (`sides`: does some call add it on each arch; NULL: no
-- call has a row for that arch), then per entry: an #if on arch macros inside its list
-- (instance_gates) drops it where it says. Only entries of lists whose sides differ, or with such
-- a gate, can differ themselves (a few hundred instead of every instance). The evidence is that of
-- the first registering call (by file and line) on the absent arch, as ck_instance_availability
-- gives it: the gate's for an entry a gate drops there, unless the build itself does. The entries'
-- columns are carried through `per` rather than joined again at the end, where SQLite would
-- build a Bloom filter over every tree's instances (40 ms).
WITH sides AS MATERIALIZED (
    SELECT r.list_id,
           max(CASE WHEN a.arch = :arch_a THEN a.available = 1 END) AS on_a,
           max(CASE WHEN a.arch = :arch_b THEN a.available = 1 END) AS on_b
    FROM availability a
    JOIN registrations r ON r.id = a.registration_id
    WHERE a.arch IN (:arch_a, :arch_b)
    GROUP BY r.list_id
),
gated AS MATERIALIZED (
    SELECT instance_id, arch, file, line, condition FROM instance_gates
    WHERE arch IN (:arch_a, :arch_b)
),
candidates(id) AS (
    -- a list with no call row on one of the archs (a tree that does not build it) is no candidate
    SELECT i.id FROM sides s JOIN instances i ON i.list_id = s.list_id WHERE s.on_a != s.on_b
    UNION
    SELECT instance_id FROM gated
),
per AS MATERIALIZED (
    SELECT i.id AS instance_id, i.list_id, i.dir, i.list_name, i.template, i.file, i.line,
           i.tile_m, i.tile_n, i.tile_k,
           -- a gate makes it 0 where its list has a call row (0 * NULL stays NULL)
           CASE WHEN ga.instance_id IS NULL THEN s.on_a ELSE 0 * s.on_a END AS on_a,
           CASE WHEN gb.instance_id IS NULL THEN s.on_b ELSE 0 * s.on_b END AS on_b
    FROM candidates c
    JOIN instances i ON i.id = c.id
    JOIN sides s ON s.list_id = i.list_id
    LEFT JOIN gated ga ON ga.instance_id = i.id AND ga.arch = :arch_a
    LEFT JOIN gated gb ON gb.instance_id = i.id AND gb.arch = :arch_b
    WHERE i.status = 'active'
),
differ AS (
    SELECT *,
           CASE WHEN on_a = 1 THEN :arch_a ELSE :arch_b END AS present_on,
           CASE WHEN on_a = 1 THEN :arch_b ELSE :arch_a END AS absent_on
    FROM per
    WHERE coalesce(on_a, 0) != coalesce(on_b, 0)
)
SELECT d.instance_id, d.dir, d.list_name, d.template, d.file, d.line,
       d.tile_m, d.tile_n, d.tile_k,
       d.present_on, d.absent_on,
       (SELECT CASE WHEN g.instance_id IS NOT NULL AND coalesce(a.layer, '') != 'build'
                    THEN 'preprocessor ' || g.file || ':' || g.line || ' '
                         || coalesce(g.condition, '')
                    ELSE a.layer || ' ' || a.file || ':' || a.line || ' '
                         || coalesce(a.condition, '')
               END
        FROM registrations r
        JOIN availability a ON a.registration_id = r.id AND a.arch = d.absent_on
        WHERE r.list_id = d.list_id
        ORDER BY r.file, r.line, r.id LIMIT 1) AS evidence
FROM differ d
LEFT JOIN gated g ON g.instance_id = d.instance_id AND g.arch = d.absent_on
ORDER BY d.dir, d.list_name, d.line;
