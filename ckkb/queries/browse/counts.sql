-- What the knowledge base holds, counted (the landing page).
SELECT (SELECT count(*) FROM instances WHERE status = 'active') AS active_instances,
       (SELECT count(*) FROM instance_lists) AS instance_lists,
       (SELECT count(*) FROM registrations) AS registrations,
       (SELECT count(*) FROM gates) AS gates,
       (SELECT count(*) FROM instance_keys) AS printed_names,
       (SELECT count(*) FROM races) AS races,
       (SELECT count(*) FROM race_results) AS race_results,
       (SELECT count(*) FROM aiter_config_rows) AS tuned_config_rows,
       (SELECT count(*) FROM aiter_audit_findings) AS audit_findings,
       (SELECT count(*) FROM harness_results) AS harness_results
