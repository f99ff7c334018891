-- Printed instance names that more than one source entry produces: the same key (op, padding, layouts, tile, MFMA shape, waves, vectors, scheduler, pipeline, ...) from two different instance-list lines. A ckProfiler winner with such a name cannot be traced to one line. Only active (compiled) entries count; keys with a value no registration binds ({unknown}) are left out; run-time values are '*' in keys, so entries that differ only there count as sharing a name.
CREATE VIEW names_ambiguous AS
SELECT key,
       min(op) AS op,
       count(DISTINCT file || ':' || line) AS entries,
       count(DISTINCT instance_id) AS instances,
       count(DISTINCT registration_id) AS registrations,
       group_concat(DISTINCT file || ':' || line) AS locations,
       max(printed_name) AS printed_name
FROM instance_keys
WHERE key NOT LIKE '%{unknown}%' AND status = 'active'
GROUP BY source_id, key
HAVING count(DISTINCT file || ':' || line) > 1;
