-- Archs the knowledge base evaluated (the arch dropdowns).
SELECT DISTINCT arch AS value FROM file_builds WHERE arch IS NOT NULL
