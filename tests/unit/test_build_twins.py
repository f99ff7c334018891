"""Two trees in one cold build: a file with the same bytes at the same path in both is extracted
once (ckkb.kb.build.run `pair`), as when the second tree is added to a database that holds the
first (the shared cache), and every row is what that two-step build gives.

Second method: the same two trees built in two steps (the first alone, then the second added,
which borrows through the cache), compared table by table with plain sqlite3."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ckkb import pipeline
from ckkb.kb.build import build
from ckkb.sources import ck_tree, named_tree
from tests.two_trees import FIXTURES, NEW, OLD, next_tree

SKIP = ("_fts", "sqlite_", "build_info", "sources")


def _rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(db)
    out = {}
    for (t,) in conn.execute("select name from sqlite_master where type = 'table'"):
        if any(s in t for s in SKIP):
            continue
        out[t] = sorted(conn.execute(f"select * from [{t}]").fetchall(), key=repr)
    return out


def test_identical_files_of_two_trees_are_extracted_once(tmp_path):
    old = named_tree(ck_tree(FIXTURES / "ck_mini"), OLD)
    new = named_tree(ck_tree(next_tree(tmp_path)), NEW)
    stages = pipeline.stages()
    both = build(tmp_path / "both.db", [old, new], stages=stages, jobs=1)
    first = build(tmp_path / "steps.db", [old], stages=stages, jobs=1)
    second = build(tmp_path / "steps.db", [old, new], stages=stages, jobs=1)
    # the second step extracts only the files ck_mini_next changed; one cold build as much
    assert 0 < second.parsed < first.parsed
    assert both.parsed == first.parsed + second.parsed
    assert both.files == second.files
    assert _rows(tmp_path / "both.db") == _rows(tmp_path / "steps.db")
