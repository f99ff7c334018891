-- GetTypeString() name schemas counted by status (matched, partial, unsupported): how many device ops' printed names ckkb can map back to CK template parameters.
CREATE VIEW names_schema_status AS
SELECT status, count(*) AS implementations, group_concat(device_op, ', ') AS device_ops
FROM name_schemas
GROUP BY status;
