"""Extractors: one module per kind of input; pure (path/bytes in, row dataclasses out)."""
