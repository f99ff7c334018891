"""Trees a rebuild need not combine again: their rows are copied from the old database.

A tree whose input files all hit the cache, with the same contents (`tree_fingerprint`) as a tree
the old database holds, has the same rows: copying them costs a fraction of combining them. That
makes adding a tree to a database cheap for the trees already in it, and adding a copy of a tree
nearly free.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ckkb.diagnostics import Diagnostic
from ckkb.kb.schema import BUILT, TABLES, Table


def old_trees(db_path: Path) -> dict[tuple[str, str], int]:
    """(kind, fingerprint) -> source id of the rows of each tree the database at db_path holds
    (a tree that reads an earlier tree's rows: that tree's id)."""
    rows = _read(
        db_path,
        "select kind, fingerprint, coalesce(rows_of, id) from sources "
        "where fingerprint is not null",
    )
    return {(r[0], r[1]): int(r[2]) for r in rows}


def old_built(db_path: Path) -> dict[str, str]:
    """tree name -> when its rows were extracted, in the database at db_path."""
    rows = _read(db_path, "select name, built from sources where name is not null")
    return {r[0]: r[1] for r in rows if r[1]}


def _read(db_path: Path, sql: str) -> list[tuple[Any, ...]]:
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            return list(conn.execute(sql))
        finally:
            conn.close()
    except sqlite3.DatabaseError:  # an older schema (no such column) or no file: nothing reused
        return []


def copy_tree_rows(
    db: Any, old_path: Path, old_id: int, new_id: int
) -> tuple[dict[str, int], list[Diagnostic]]:
    """Copy one tree's rows of every built table from the old database, under its new source id;
    its diagnostics come back for the build's summary."""
    counts: dict[str, int] = {}
    db.execute("attach database ? as old", [str(old_path)])
    try:
        for t in _tree_tables():
            cols = t.column_names()
            names = ", ".join(f"[{c}]" for c in cols)
            picks = ", ".join("?" if c == "source_id" else f"[{c}]" for c in cols)
            with db.conn:
                cur = db.conn.execute(
                    f"insert into main.[{t.name}] ({names}) "
                    f"select {picks} from old.[{t.name}] where source_id = ?",
                    [new_id, old_id],
                )
            if cur.rowcount > 0 and t.name != "diagnostics":  # those are summed apart
                counts[t.name] = cur.rowcount
        diags = stored_diagnostics(db, "old", old_id)
    finally:
        db.conn.commit()
        db.execute("detach database old")
    return counts, diags


def stored_tree(db: Any, source_id: int) -> tuple[dict[str, int], list[Diagnostic]]:
    """The row counts and diagnostics of one tree already in the database (`extend`)."""
    counts: dict[str, int] = {}
    for t in _tree_tables():
        if t.name == "diagnostics":  # summed apart, as in copy_tree_rows
            continue
        n = db.conn.execute(
            f"select count(*) from [{t.name}] where source_id = ?", [source_id]
        ).fetchone()[0]
        if n:
            counts[t.name] = n
    return counts, stored_diagnostics(db, "main", source_id)


def stored_diagnostics(db: Any, schema: str, source_id: int) -> list[Diagnostic]:
    return [
        Diagnostic(r[0], r[1], r[2], r[3], r[4])
        for r in db.conn.execute(
            f"select file, line, message, severity, stage from {schema}.diagnostics "
            "where source_id = ?",
            [source_id],
        )
    ]


def _tree_tables() -> list[Table]:
    """The built tables whose rows belong to one tree."""
    return [t for t in TABLES.values() if t.kind == BUILT and "source_id" in t.column_names()]
