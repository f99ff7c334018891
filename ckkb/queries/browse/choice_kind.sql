-- Gate kinds (gate_census' kind dropdown).
SELECT DISTINCT kind AS value FROM gates ORDER BY kind
