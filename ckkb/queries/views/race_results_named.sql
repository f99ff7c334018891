-- Every race result with its name's parsed fields (race_names, parsed once per distinct name, by the CK tree name_tree): one row per instance line.
CREATE VIEW race_results_named AS
SELECT rr.*, n.op_template, n.schema AS name_schema, n.fields, n.tree AS name_tree
FROM race_results rr
LEFT JOIN race_names n ON n.name = rr.name;
