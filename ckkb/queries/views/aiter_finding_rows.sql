-- aiter audit findings with the config row they point at (shape, part, kernel, tuned us), for joining with races and harness results.
CREATE VIEW aiter_finding_rows AS
SELECT
  f.rule, f.severity, f.file, f.line, f.op, f.message,
  r.arch, r.gfx, r.cu_num, r.M, r.N, r.K, r.kernelId, r.kernelName, r.splitK, r.us
FROM aiter_audit_findings f
LEFT JOIN aiter_config_rows r ON r.file = f.file AND r.line = f.line AND r.source_id = f.source_id;
