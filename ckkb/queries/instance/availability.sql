-- Per-arch availability of a set of registrations (:ids is a JSON array of registration ids).
SELECT * FROM availability
WHERE registration_id IN (SELECT value FROM json_each(:ids))
ORDER BY arch, registration_id
