-- Audit rules with findings (audit_findings' rule dropdown).
SELECT DISTINCT rule AS value FROM aiter_audit_findings ORDER BY rule
