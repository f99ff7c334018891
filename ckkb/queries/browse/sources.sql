-- The source trees a knowledge base was built from, with their versions (the landing page).
SELECT kind, path, version, wheel_version FROM sources ORDER BY kind
