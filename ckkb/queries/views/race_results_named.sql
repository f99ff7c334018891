-- Every race result with its name's parsed fields: one row per instance line. race_names holds a
-- reading per (name, CK tree that read it); a race ingested with `--tree` (races.name_tree)
-- joins that tree's reading, any other race the name's chosen reading (name_tree: the tree
-- whose schemas read it; NULL when the knowledge base had no CK tree).
CREATE VIEW race_results_named AS
SELECT rr.*, n.op_template, n.schema AS name_schema, n.fields, nullif(n.tree, '') AS name_tree
FROM race_results rr
LEFT JOIN races r ON r.id = rr.race_id
LEFT JOIN race_names n
    ON n.name = rr.name
   AND (CASE WHEN r.name_tree IS NULL THEN n.chosen = 1 ELSE n.tree = r.name_tree END);
