-- title: Instances added, removed or changed between two CK trees
-- description: The instance entries of CK tree `to` that CK tree `from` lacks (added), those it
-- has that `to` lacks (removed), and the same instance whose availability differs on an arch both
-- trees build for (changed, one row per arch; `arch` empty = every such arch). An instance is its
-- device-op template plus its resolved template arguments, never its file or line: a list moved to
-- another file is not a change. The same instance written twice in one tree counts twice (the n-th
-- of one tree pairs with the n-th of the other, in file order). Optional filters: `dir` (directory
-- under gpu/), `dtype` (a C++ type such as bhalf_t that A, B and C all have), `layout` (the GEMM
-- layout: mk_kn, mk_nk, km_kn or km_nk).
-- params: from, to, arch, dir, dtype, layout
-- Written against the main tables with each tree's source_id, so it reads two trees at once
-- (`main.` keeps Datasette's one-tree scoping, ckkb.kb.trees.scoped_sql, off it). `ckkb diff`
-- runs this same statement for its instance lists.
WITH ids(from_id, to_id) AS (
    SELECT (SELECT coalesce(rows_of, id) FROM main.sources WHERE kind = 'ck' AND name = :from),
           (SELECT coalesce(rows_of, id) FROM main.sources WHERE kind = 'ck' AND name = :to)
),
archs(arch) AS (
    SELECT arch FROM main.tree_archs
    WHERE source_id = (SELECT from_id FROM ids) AND evaluated = 1 AND (:arch = '' OR arch = :arch)
    INTERSECT
    SELECT arch FROM main.tree_archs
    WHERE source_id = (SELECT to_id FROM ids) AND evaluated = 1
),
-- the entries of the two trees that pass the filters (two branches so that a `dir` uses its index:
-- SQLite tests a branch's constant condition once, before reading a row)
picked AS (
    SELECT i.source_id, i.id, i.list_id, i.template, i.resolved, i.dir, i.file, i.line,
           i.list_name, i.status, i.a_layout, i.b_layout, i.a_dtype, i.b_dtype, i.c_dtype
    FROM main.instances i
    WHERE :dir != '' AND i.dir = :dir
      AND i.source_id IN (SELECT from_id FROM ids UNION ALL SELECT to_id FROM ids)
    UNION ALL
    SELECT i.source_id, i.id, i.list_id, i.template, i.resolved, i.dir, i.file, i.line,
           i.list_name, i.status, i.a_layout, i.b_layout, i.a_dtype, i.b_dtype, i.c_dtype
    FROM main.instances i
    WHERE :dir = ''
      AND i.source_id IN (SELECT from_id FROM ids UNION ALL SELECT to_id FROM ids)
),
inst AS MATERIALIZED (
    SELECT i.source_id, i.id, i.list_id, i.template, i.resolved, i.dir, i.file, i.line,
           i.list_name, i.status, i.a_layout, i.b_layout,
           row_number() OVER (PARTITION BY i.source_id, i.template, i.resolved
                              ORDER BY i.dir, i.file, i.line, i.id) AS n
    FROM picked i
    WHERE (:dtype = '' OR (i.a_dtype IN (:dtype, 'ck::' || :dtype)
                           AND i.b_dtype IN (:dtype, 'ck::' || :dtype)
                           AND i.c_dtype IN (:dtype, 'ck::' || :dtype)))
      -- the layout as the result's `layout` column spells it (an instance's layout is part of
      -- its identity, so filtering before the pairing pairs the same entries)
      AND (:layout = '' OR (CASE i.a_layout WHEN 'Row' THEN 'mk' WHEN 'Col' THEN 'km' END || '_'
                            || CASE i.b_layout WHEN 'Row' THEN 'kn' WHEN 'Col' THEN 'nk' END)
                           = :layout)
),
-- the n-th occurrence of an instance in one tree pairs with its n-th in the other (a GROUP BY,
-- not a join on the long argument text: a sort, where a join would compare every pair)
pairs AS MATERIALIZED (
    SELECT CASE WHEN max(i.source_id = x.from_id) = 0 THEN 'added'
                WHEN max(i.source_id = x.to_id) = 0 THEN 'removed' ELSE 'same' END AS change,
           i.template, i.resolved,
           coalesce(max(CASE WHEN i.source_id = x.to_id THEN i.dir END),
                    max(CASE WHEN i.source_id = x.from_id THEN i.dir END)) AS dir,
           max(i.a_layout) AS a_layout, max(i.b_layout) AS b_layout,
           max(CASE WHEN i.source_id = x.from_id THEN i.id END) AS from_id,
           max(CASE WHEN i.source_id = x.from_id THEN i.list_name END) AS from_list,
           max(CASE WHEN i.source_id = x.from_id THEN i.file END) AS from_file,
           max(CASE WHEN i.source_id = x.from_id THEN i.line END) AS from_line,
           max(CASE WHEN i.source_id = x.from_id THEN i.status END) AS from_status,
           max(CASE WHEN i.source_id = x.from_id THEN i.list_id END) AS from_list_id,
           max(CASE WHEN i.source_id = x.to_id THEN i.id END) AS to_id,
           max(CASE WHEN i.source_id = x.to_id THEN i.list_name END) AS to_list,
           max(CASE WHEN i.source_id = x.to_id THEN i.file END) AS to_file,
           max(CASE WHEN i.source_id = x.to_id THEN i.line END) AS to_line,
           max(CASE WHEN i.source_id = x.to_id THEN i.status END) AS to_status,
           max(CASE WHEN i.source_id = x.to_id THEN i.list_id END) AS to_list_id
    FROM inst i, ids x
    GROUP BY i.template, i.resolved, i.n
),
-- per (tree, list, arch): some registering call adds the list (ck_instance_availability's rule;
-- an entry is then added unless it is commented out or an #if inside the list drops it)
list_avail AS MATERIALIZED (
    SELECT r.source_id, r.list_id, a.arch, max(a.available) AS available
    FROM main.registrations r
    JOIN main.availability a ON a.registration_id = r.id AND a.source_id = r.source_id
    WHERE r.source_id IN (SELECT from_id FROM ids UNION ALL SELECT to_id FROM ids)
      AND r.list_id IN (SELECT list_id FROM inst)
      AND a.arch IN (SELECT arch FROM archs)
    GROUP BY r.source_id, r.list_id, a.arch
),
-- an entry is available on an arch when it is active, its list is added there, and no #if inside
-- the list drops it (instance_gates); read per pair and arch, for the pairs compared only
per_arch AS (
    SELECT p.*, x.arch,
           CASE WHEN p.from_status = 'active' AND lf.available = 1 AND gf.instance_id IS NULL
                THEN 1 ELSE 0 END AS on_from,
           CASE WHEN p.to_status = 'active' AND lt.available = 1 AND gt.instance_id IS NULL
                THEN 1 ELSE 0 END AS on_to
    FROM pairs p
    CROSS JOIN archs x
    LEFT JOIN list_avail lf
        ON lf.source_id = (SELECT from_id FROM ids) AND lf.list_id = p.from_list_id
       AND lf.arch = x.arch
    LEFT JOIN list_avail lt
        ON lt.source_id = (SELECT to_id FROM ids) AND lt.list_id = p.to_list_id
       AND lt.arch = x.arch
    LEFT JOIN main.instance_gates gf
        ON gf.instance_id = p.from_id AND gf.source_id = (SELECT from_id FROM ids)
       AND gf.arch = x.arch
    LEFT JOIN main.instance_gates gt
        ON gt.instance_id = p.to_id AND gt.source_id = (SELECT to_id FROM ids)
       AND gt.arch = x.arch
    WHERE p.change = 'same' OR :arch != ''
)
SELECT CASE change WHEN 'same' THEN 'changed' ELSE change END AS change,
       arch, template, dir,
       CASE WHEN a_layout IN ('Row', 'Col') AND b_layout IN ('Row', 'Col')
            THEN (CASE a_layout WHEN 'Row' THEN 'mk' ELSE 'km' END) || '_' ||
                 (CASE b_layout WHEN 'Row' THEN 'kn' ELSE 'nk' END)
       END AS layout,
       CASE WHEN from_id IS NULL THEN NULL ELSE coalesce(on_from, 0) END AS on_from,
       CASE WHEN to_id IS NULL THEN NULL ELSE coalesce(on_to, 0) END AS on_to,
       from_list, from_file, from_line, from_status, to_list, to_file, to_line, to_status,
       from_id, to_id, resolved
FROM (
    SELECT * FROM per_arch
    WHERE change != 'same' OR on_from != on_to
    UNION ALL
    SELECT *, NULL, NULL, NULL FROM pairs WHERE change != 'same' AND :arch = ''
)
ORDER BY 1, dir, template, coalesce(to_file, from_file), coalesce(to_line, from_line), arch;
