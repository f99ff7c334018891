"""Form inputs filled from the knowledge base, and the nearest values when a value is not there.

Every canned-query parameter whose name says what it holds (arch, arch_a, dir, dtype, layout, kind,
rule, severity, file, status, race_id, tree; version_diff's from and to: its CK trees) is a dropdown
of the values the knowledge base has (ckkb/queries/browse/choice_*.sql); `tile` is a text box with
the tiles that exist as suggestions. When a page's rows are empty, `unknown()` names the parameters
whose values the knowledge base does not have and the nearest ones it does (tiles: the same
`nearest` the CLI's `ckkb why` prints).
"""

from __future__ import annotations

import difflib
import sqlite3
from typing import Any

from ckkb import queries
from ckkb.web import validate

# parameter name -> ckkb/queries/browse/choice_<source>.sql
SOURCES = {
    "arch": "arch",
    "arch_a": "arch",
    "arch_b": "arch",
    "dir": "dir",
    "dtype": "dtype",
    "kind": "kind",
    "rule": "rule",
    "severity": "severity",
    "file": "file",
    "status": "status",
    "race_id": "race_id",
    "tile": "tile",
    "tree": "tree",
    "from": "ck_tree",
    "to": "ck_tree",
    "layout": "layout",
}
FREE_TEXT = {"tile"}  # a text box with suggestions: any MxNxK may be asked


def load(conn: sqlite3.Connection) -> dict[str, list[tuple[str, str]]]:
    """source -> [(value, label)], read once per served knowledge base."""
    out: dict[str, list[tuple[str, str]]] = {}
    for source in sorted(set(SOURCES.values())):
        rows = queries.rows(conn, "browse", f"choice_{source}")
        values = [(str(r["value"]), str(r.get("label") or r["value"])) for r in rows]
        out[source] = values
    return out


def for_params(
    params: list[str], loaded: dict[str, list[tuple[str, str]]]
) -> dict[str, list[tuple[str, str]]]:
    return {p: loaded[SOURCES[p]] for p in params if p in SOURCES}


def unknown(
    conn: sqlite3.Connection, args: dict[str, str], loaded: dict[str, list[tuple[str, str]]]
) -> dict[str, tuple[str, list[str]]]:
    """param -> (value, nearest values) for each given value the knowledge base does not have."""
    out: dict[str, tuple[str, list[str]]] = {}
    for p, value in args.items():
        source = SOURCES.get(p)
        if not value or source is None or source in ("tree", "ck_tree"):  # a 400 already
            continue
        values = [v for v, _ in loaded.get(source, [])]
        if value in values:
            continue
        if source == "tile":
            out[p] = (value, _nearest_tiles(conn, value, args.get("arch")))
        else:
            out[p] = (value, difflib.get_close_matches(value, values, n=3, cutoff=0.5))
    return out


def _nearest_tiles(conn: sqlite3.Connection, tile: str, arch: str | None) -> list[str]:
    import sqlite_utils

    from ckkb.queries import ck

    dims = validate.parse_tile(tile)
    if dims is None:
        return []
    found: list[dict[str, Any]] = ck.nearest(sqlite_utils.Database(conn), dims, [], None, arch)
    return list(dict.fromkeys(str(r["tile"]) for r in found))
