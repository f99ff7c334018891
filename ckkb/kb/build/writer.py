"""Writing a build's rows: bulk inserts, the tree sources, ingested rows carried forward, and the
input fingerprint that makes an unchanged rebuild a no-op."""

from __future__ import annotations

import hashlib
import operator
import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import ckkb
from ckkb.errors import DatabaseError
from ckkb.kb import db as kbdb
from ckkb.kb import migrate
from ckkb.kb.schema import INGESTED, SCHEMA_VERSION, TABLES
from ckkb.kb.schema.core import SourceRow
from ckkb.sources import NamedTree

FingerprintPart = tuple[str, str, str, str]

# sqlite3 binds an int, float, str or bytes as it is; any other value (None, a bool) first goes
# through its adapter protocol, which fails two attribute lookups, each building an AttributeError.
# A build of aiter 2026-08 binds 906,000 of them: 1.2 of its executemany's 8.0 G instructions
# (cachegrind) go away with an adapter registered for the type, which answers at once with what
# sqlite3 binds anyway (NULL; 0 or 1). sqlite3's registry is the process's (why this is done at
# import): these change no value anyone binds.
sqlite3.register_adapter(type(None), lambda _none: None)
sqlite3.register_adapter(bool, int)


def _row_values(
    rows: list[Any], cols: list[str], json_cols: set[str], source_id: int | None
) -> list[list[Any]]:
    """Column values of each row in `cols` order; JSON columns serialised, source_id filled in."""
    fields = [c for c in cols if c != "source_id" or hasattr(rows[0], "source_id")]
    get = (
        operator.attrgetter(*fields)
        if len(fields) > 1
        else (lambda r, _f=fields[0]: (getattr(r, _f),))
    )
    json_pos = [i for i, c in enumerate(fields) if c in json_cols]
    add_source = len(fields) < len(cols)
    source_pos = fields.index("source_id") if not add_source and "source_id" in cols else -1
    to_json = kbdb.to_json
    out = []
    for r in rows:
        vals = list(get(r))
        for i in json_pos:
            v = vals[i]
            if v is not None and not isinstance(v, str):
                vals[i] = to_json(v)
        if add_source:
            vals.append(source_id)
        elif source_pos >= 0 and vals[source_pos] is None:
            vals[source_pos] = source_id
        out.append(vals)
    return out


def insert_rows(db: Any, rows: Iterable[Any], source_id: int | None = None) -> dict[str, int]:
    """Bulk-insert row dataclasses, grouped by table, in one transaction per table."""
    by_table: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        by_table[type(r).__table__].append(r)
    counts = {}
    for name, items in by_table.items():
        t = TABLES[name]
        cols = t.column_names()
        fields = [c for c in cols if c != "source_id" or hasattr(items[0], "source_id")] + (
            ["source_id"] if "source_id" in cols and not hasattr(items[0], "source_id") else []
        )
        names = ", ".join("[" + c + "]" for c in fields)
        sql = f"insert or replace into [{name}] ({names}) values ({', '.join('?' * len(fields))})"
        json_cols = {c.name for c in t.columns if c.json}
        try:
            values = _row_values(items, cols, json_cols, source_id)
            with db.conn:
                db.conn.executemany(sql, values)
        except (sqlite3.InterfaceError, sqlite3.ProgrammingError):
            # a value of an unexpected type (a dict in a TEXT column, say): convert every value
            slow = [
                [kbdb.sql_value(v) for v in vals]
                for vals in _row_values(items, cols, set(), source_id)
            ]
            with db.conn:
                db.conn.executemany(sql, slow)
        counts[name] = len(items)
    return counts


def tree_sources(trees: list[NamedTree], ids: dict[str, int]) -> list[SourceRow]:
    """One sources row per tree (files, built and fingerprint are the build's to fill in)."""
    out = []
    for t in trees:
        version = getattr(t.tree, "version", None)
        wheel = getattr(t.tree, "wheel_version", None) if t.kind == "ck" else version
        out.append(
            SourceRow(
                id=ids[t.name],
                kind=t.kind,
                path=str(t.root),
                version=version if t.kind == "ck" else None,
                wheel_version=wheel,
                name=t.name,
                commit=t.commit,
            )
        )
    return out


def tree_fingerprint(kind: str, parts: list[FingerprintPart]) -> str:
    """A tree's contents as the extractors see them, whatever its path: (stage, version, rel,
    sha256) of every input file. Two trees with one fingerprint have the same rows."""
    return fingerprint([("kind", kind, "", ""), *parts])


def check_old(db_path: Path) -> bool:
    """True when an old knowledge base exists to carry ingested data from; refuses other files."""
    if not db_path.exists():
        return False
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        names = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        conn.close()
    except sqlite3.DatabaseError as e:
        raise DatabaseError(
            f"{db_path} exists and is not a SQLite database ({e}); refusing to overwrite it",
            hint="move it away or pass --db PATH",
        ) from None
    if "build_info" not in names:
        raise DatabaseError(
            f"{db_path} exists and is not a ckkb knowledge base; refusing to overwrite it",
            hint="move it away or pass --db PATH",
        )
    return True


def carry_ingested(new: Any, old_path: Path) -> dict[str, int]:
    """Copy every ingested table's rows from the old database into the new one."""
    carried = {}
    new.execute("attach database ? as old", [str(old_path)])
    try:
        old_tables = {
            r[0] for r in new.execute("select name from old.sqlite_master where type='table'")
        }
        for t in TABLES.values():
            if t.kind != INGESTED or t.name not in old_tables:
                continue
            old_cols = {r[1] for r in new.execute(f"pragma old.table_info([{t.name}])")}
            cols = migrate.carried(t, old_cols)  # by name; an older schema's rows reshaped
            if not cols:
                continue
            cl = ", ".join(f"[{c}]" for c, _ in cols)
            picks = ", ".join(e for _, e in cols)
            with new.conn:
                cur = new.execute(
                    f"insert or ignore into main.[{t.name}] ({cl}) "
                    f"select {picks} from old.[{t.name}]"
                )
            if cur.rowcount > 0:
                carried[t.name] = cur.rowcount
    finally:
        new.conn.commit()
        new.execute("detach database old")
    return carried


def stored_fingerprint(db_path: Path) -> str | None:
    """The input fingerprint recorded by the build that wrote db_path (sqlite3 only: cheap)."""
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            row = conn.execute("select value from build_info where key='fingerprint'").fetchone()
            version = conn.execute(
                "select value from build_info where key='schema_version'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
    if not row or not version or version[0] != str(SCHEMA_VERSION):
        return None
    return str(row[0])


def fingerprint(parts: list[FingerprintPart]) -> str:
    h = hashlib.sha256(f"{ckkb.__version__}|{SCHEMA_VERSION}".encode())
    for p in sorted(parts):
        h.update("|".join(p).encode())
        h.update(b"\n")
    return h.hexdigest()
