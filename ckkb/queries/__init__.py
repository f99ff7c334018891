"""Queries and views: SQL kept in files, read by the CLI and the web alike (never written twice).

- `canned/NAME.sql`: the canned queries (the CLI runs them; Datasette serves them as pages).
- `views/NAME.sql`: views created at build time.
- `lookups/`: statements the library runs (`lookup()`).
- `instance/`, `browse/`: the statements the web's own pages run (explain page, charts, landing
  page, search, form choices), through `rows()`.
"""

from __future__ import annotations

import sqlite3
from functools import cache
from importlib import resources
from typing import Any


def sql(name: str) -> str:
    """The text of ckkb/queries/canned/NAME.sql."""
    return resources.files("ckkb.queries").joinpath("canned", f"{name}.sql").read_text()


def lookup(name: str) -> str:
    """The text of ckkb/queries/lookups/NAME.sql: a statement the library runs (no page)."""
    return resources.files("ckkb.queries").joinpath("lookups", f"{name}.sql").read_text()


@cache
def text(group: str, name: str) -> str:
    """The text of ckkb/queries/GROUP/NAME.sql (package data: read once per process)."""
    return resources.files("ckkb.queries").joinpath(group, f"{name}.sql").read_text()


def rows(
    conn: sqlite3.Connection, group: str, name: str, params: Any = None
) -> list[dict[str, Any]]:
    """Run ckkb/queries/GROUP/NAME.sql on a sqlite3 connection; rows as dicts."""
    cur = conn.execute(text(group, name), params if params is not None else {})
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
