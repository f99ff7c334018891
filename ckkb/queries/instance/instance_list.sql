-- The instance list an instance is an entry of (name, file, line, its comment).
SELECT * FROM instance_lists WHERE id = :list_id
