"""Schema 4 -> 5 (race_names keyed by (name, tree), races.name_tree): a knowledge base of the older
schema is refused with one line saying to rebuild; `ckkb build` carries its ingested rows over
(ckkb.kb.migrate); a build killed at any point of the migration leaves a readable database,
old or new, with every ingested row and every result's reading as before.

The schema-4 database is made here from a built one, by SQL written for this test (`_as_schema_4`:
the tables and the view as schema 4 defined them), so the migration reads a file it did not write.
"""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ckkb.kb.schema import SCHEMA_VERSION
from tests.conftest import SAMPLES
from tests.faults.conftest import BUILD, ckkb, stored

POINTS = ["build-locking", "build-carried", "build-before-rename", "build-after-rename"]

SCHEMA_4 = """
drop view if exists race_results_named;
create table race_names_4 (
    name TEXT PRIMARY KEY, op_template TEXT, schema TEXT, fields TEXT, tree TEXT
);
insert into race_names_4 select name, op_template, schema, fields, nullif(tree, '')
    from race_names where chosen = 1;
drop table race_names;
alter table race_names_4 rename to race_names;
alter table races drop column name_tree;
create view race_results_named as
    select rr.*, n.op_template, n.schema as name_schema, n.fields, n.tree as name_tree
    from race_results rr left join race_names n on n.name = rr.name;
update build_info set value = '4' where key = 'schema_version';
"""


def _as_schema_4(db: Path) -> None:
    """The knowledge base as schema 4 stored it: one reading per name (the one every result
    joined), one of them made with no CK tree (tree NULL)."""
    conn = sqlite3.connect(db)
    try:
        conn.executescript(SCHEMA_4)
        conn.execute(
            "update race_names set tree = null where name = (select min(name) from race_names)"
        )
        conn.commit()
    finally:
        conn.close()


def _version(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(
            conn.execute("select value from build_info where key = 'schema_version'").fetchone()[0]
        )
    finally:
        conn.close()


def _readings(db: Path) -> dict[int, tuple[Any, ...]]:
    """result id -> (name, op, schema, fields, tree) as race_results_named joins them."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {
            r[0]: tuple(r[1:])
            for r in conn.execute(
                "select id, name, op_template, name_schema, fields, name_tree "
                "from race_results_named"
            )
        }
    finally:
        conn.close()


@pytest.fixture
def old_kb(kb: Path, tmp_path: Path) -> Path:
    """The fault tests' knowledge base with a second log, in schema 4."""
    r = ckkb("ingest", "--db", kb, SAMPLES / "012.txt")
    assert r.returncode == 0, r.stderr
    _as_schema_4(kb)
    return kb


def test_an_old_schema_is_refused_with_one_line(old_kb: Path) -> None:
    r = ckkb("races", "--db", old_kb, "--json")
    assert r.returncode == 2
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ckkb: error:")]
    assert errors == [
        f"ckkb: error: {old_kb} has schema version 4; this ckkb reads version {SCHEMA_VERSION}"
    ]
    assert "ingested logs and bundles are carried over" in r.stderr


@pytest.mark.parametrize("point", POINTS)
def test_a_migration_killed_loses_no_ingested_row(old_kb: Path, point: str) -> None:
    before, readings = stored(old_kb), _readings(old_kb)
    assert before["races"] >= 2 and len(readings) == before["race_results"] > 100
    assert sum(1 for r in readings.values() if r[4] is None) > 0  # the reading with no tree
    assert all(r[2] is not None for r in readings.values())  # every result has its reading
    r = ckkb(*BUILD, "--db", old_kb, CKKB_FAULT=point)
    assert r.returncode == -signal.SIGKILL, r.stderr
    # before the rename the old file stands, untouched; after it, the migrated one
    assert _version(old_kb) == (str(SCHEMA_VERSION) if point == "build-after-rename" else "4")
    assert stored(old_kb) == before and _readings(old_kb) == readings
    r = ckkb(*BUILD, "--db", old_kb)
    assert r.returncode == 0, r.stderr
    assert _version(old_kb) == str(SCHEMA_VERSION) == "6"
    assert stored(old_kb) == before and _readings(old_kb) == readings
    assert ckkb("races", "--db", old_kb, "--json").returncode == 0
