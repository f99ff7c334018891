-- Audit severities with findings.
SELECT DISTINCT severity AS value FROM aiter_audit_findings ORDER BY severity
