-- title: GetTypeString() schema coverage
-- description: Every GetTypeString() implementation under include/ck/tensor_operation/gpu/device/impl/ with the status of its name schema (matched: literals and template parameters only; partial: has run-time (derived) or conditional values; unsupported: no schema) and why. `status` filters (empty = all).
-- params: status
SELECT id, device_op, op, status, file, line, reasons
FROM name_schemas
WHERE :status = '' OR status = :status
ORDER BY CASE status WHEN 'unsupported' THEN 0 WHEN 'partial' THEN 1 ELSE 2 END, device_op, file
