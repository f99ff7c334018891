-- Diagnostics that change answers, each with its kind: a file that did not parse (nothing read
-- from it), an instance list a registration names but that was not found (its instances are
-- unknown), an instance-list entry whose device-op template was not resolved (no fields, so no
-- tile, dtype or layout). Other diagnostics (notes, a list nested in a list) change no answer.
SELECT CASE
         WHEN message LIKE 'malformed C++%' OR message LIKE 'CMake syntax%'
              OR message LIKE 'binary data%' OR message LIKE 'no build rules read%'
              OR message LIKE 'no instance list readable%' THEN 'unparsed'
         WHEN stage = 'ck.registrations' AND message LIKE 'instance list % not found%'
              THEN 'list_not_found'
         WHEN stage = 'ck.instances' AND (message LIKE 'unknown device-op template%'
              OR message LIKE '%is not a device-op template instantiation%'
              OR message LIKE '% takes %template arguments%') THEN 'unresolved'
       END AS kind,
       stage, file, line, severity, message
FROM diagnostics
WHERE kind IS NOT NULL
ORDER BY kind, file, line
