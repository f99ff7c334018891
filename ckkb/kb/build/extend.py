"""A build that only adds trees starts from a copy of the old database, not from an empty file.

When every tree the old database holds is unchanged (its rows would be copied, `reuse`) and keeps
its source id, the new file is the old one plus the added trees. Copying the file costs a fraction
of copying its rows one table at a time, then indexing and full-text indexing them again: adding a
tree then costs what that tree costs, whatever the database already holds. Everything else (a
changed or dropped tree, another schema) starts from an empty file.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ckkb.kb import lock
from ckkb.kb.schema import INGESTED, SCHEMA_VERSION, TABLES


def extends(
    db_path: Path, reused: dict[str, int], source_ids: dict[str, int], rows_of: dict[str, str]
) -> bool:
    """True when the database at db_path can be the start of this build: this schema, and each
    of its trees kept in place: its own rows reused under the same source id, or the same
    earlier tree's rows read again (`shared_rows`)."""
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            version = conn.execute(
                "select value from build_info where key = 'schema_version'"
            ).fetchone()
            trees = conn.execute("select id, name, rows_of from sources").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    if version is None or version[0] != str(SCHEMA_VERSION) or not trees:
        return False

    def kept(sid: int, name: str, shared: int | None) -> bool:
        if source_ids.get(name) != sid:
            return False
        if shared is None:
            return reused.get(name) == sid and name not in rows_of
        return name in rows_of and source_ids.get(rows_of[name]) == shared

    return all(kept(*t) for t in trees)


def copy_base(db_path: Path, tmp: Path) -> None:
    """The old database's file into tmp, copied under the writer lock (an ingest waits the ~0.1 s
    it takes: the copy is never half of one), less what the build writes again: the tree list,
    and the ingested rows (carried forward under the lock at the end, as into an empty file)."""
    with lock.acquire(db_path, "build"):
        lock.recover(db_path, locked=True)  # a killed writer's hot journal: roll it back first
        shutil.copyfile(db_path, tmp)
    dst = sqlite3.connect(tmp)
    try:
        with dst:
            dst.execute("delete from sources")
            present = {r[0] for r in dst.execute("select name from sqlite_master")}
            for t in TABLES.values():
                if t.kind == INGESTED and t.name in present:
                    dst.execute(f"delete from [{t.name}]")
    finally:
        dst.close()


def add_fts_rows(db: Any, source_ids: Iterable[int]) -> None:
    """Full-text index the rows of these trees, in each table whose index the copy carries."""
    ids = sorted(set(source_ids))
    if not ids:
        return
    marks = ", ".join("?" for _ in ids)
    for t in TABLES.values():
        if not t.fts:
            continue
        fts = db.table(t.name).detect_fts()
        if not fts:
            continue
        cols = ", ".join(f"[{c}]" for c in t.fts)
        db.execute(
            f"insert into [{fts}] (rowid, {cols}) "
            f"select rowid, {cols} from [{t.name}] where source_id in ({marks})",
            ids,
        )


def fts_marks(db: Any, tables: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Each table's last rowid and row count: the rows inserted after it are the new ones."""
    out = {}
    for t in tables:
        row = db.execute(f"select max(rowid), count(*) from [{t}]").fetchone()
        out[t] = (row[0] or 0, row[1])
    return out


def add_fts_since(db: Any, marks: dict[str, tuple[int, int]], added: dict[str, int]) -> set[str]:
    """Full-text index the rows inserted after each table's mark (`added[table]` of them), in
    the index built already from its earlier rows: a later tree of one build adds its own rows,
    as an extending build adds its trees' (`add_fts_rows`), instead of every row being indexed
    again at the end. Returns the tables whose insert replaced earlier rows instead (their index
    holds rows no longer there: it is rebuilt at the end)."""
    stale = set()
    for name, (mark, count) in sorted(marks.items()):
        t = TABLES[name]
        fts = db.table(name).detect_fts()
        if not t.fts or not fts:
            continue
        if db.execute(f"select count(*) from [{name}]").fetchone()[0] != count + added[name]:
            stale.add(name)
            continue
        cols = ", ".join(f"[{c}]" for c in t.fts)
        db.execute(
            f"insert into [{fts}] (rowid, {cols}) "
            f"select rowid, {cols} from [{name}] where rowid > ?",
            [mark],
        )
    return stale
