-- title: Source entries behind a printed instance name
-- description: The instance-list entries (file, line, list) and registrations whose printed-name key equals `key` (the name without whitespace, run-time values as '*'; `ckkb locate` computes it with the op's GetTypeString() schema). More than one distinct active entry means the printed name is ambiguous; commented-out entries (not compiled) are listed with their status and reason.
-- params: key
SELECT k.instance_id, k.registration_id, k.key, k.printed_name, k.op, k.device_op, k.bindings,
       k.file, k.line, k.list_name, k.status, i.reason, i.list_id, i.template, i.dir, i.ordinal, i.a_dtype, i.b_dtype, i.c_dtype,
       r.function, r.file AS registration_file, r.line AS registration_line, r.condition
FROM instance_keys k
JOIN instances i ON i.id = k.instance_id
LEFT JOIN registrations r ON r.id = k.registration_id
WHERE k.key = :key
ORDER BY k.status = 'active' DESC, k.file, k.line, k.registration_id
