"""Readers and evaluators of the languages ckkb reads (no rows, no database)."""
