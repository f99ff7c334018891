-- The registering calls that instantiate a list (by id; by name for calls whose list was not resolved).
SELECT * FROM registrations
WHERE list_id = :list_id OR (list_id IS NULL AND list_name = :list_name)
ORDER BY file, line
