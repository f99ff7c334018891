-- Config files with audit findings.
SELECT DISTINCT file AS value FROM aiter_audit_findings ORDER BY file
