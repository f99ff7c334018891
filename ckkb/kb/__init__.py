"""The knowledge base: schema, build, ingestion. The only layer that writes SQLite."""
