-- When and by which ckkb the knowledge base was built.
SELECT key, value FROM build_info WHERE key IN ('ckkb_version', 'built_at', 'schema_version')
