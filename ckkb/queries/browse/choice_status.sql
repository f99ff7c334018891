-- Name schema statuses (names_coverage' status dropdown).
SELECT DISTINCT status AS value FROM name_schemas ORDER BY status
