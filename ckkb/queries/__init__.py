"""Queries and views: SQL kept in files, read by the CLI and the web alike (never written twice)."""

from __future__ import annotations

from importlib import resources


def sql(name: str) -> str:
    """The text of ckkb/queries/canned/NAME.sql."""
    return resources.files("ckkb.queries").joinpath("canned", f"{name}.sql").read_text()


def lookup(name: str) -> str:
    """The text of ckkb/queries/lookups/NAME.sql: a
    statement the library runs (not a canned page)."""
    return resources.files("ckkb.queries").joinpath("lookups", f"{name}.sql").read_text()
