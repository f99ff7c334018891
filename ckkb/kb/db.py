"""Open, create and check knowledge-base files. The only module that knows the DDL."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ckkb import vocabulary
from ckkb.errors import DatabaseError
from ckkb.kb import lock, trees, validate
from ckkb.kb.schema import BUILT, SCHEMA_VERSION, TABLES, Table

if TYPE_CHECKING:
    import sqlite_utils


def sqlite_utils_module() -> ModuleType:
    """sqlite_utils, imported without pandas and numpy unless something already imported them.

    sqlite_utils imports both when installed (0.6 s, more than a warm build) only to convert
    pandas/numpy values on insert; ckkb inserts plain Python values, so it never needs them.
    """
    if "sqlite_utils" in sys.modules:
        return sys.modules["sqlite_utils"]
    blocked = [m for m in ("pandas", "numpy") if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None  # type: ignore[assignment]  # `import m` raises ImportError
    try:
        import sqlite_utils
    finally:
        for m in blocked:
            if sys.modules.get(m) is None:
                del sys.modules[m]
    return sqlite_utils


BUILD_HINT = "build it with `ckkb build` (or pass --db PATH to an existing knowledge base)"


def create_tables(db: sqlite_utils.Database) -> None:
    """Create every registered table (no indexes: those come after the bulk load)."""
    for t in TABLES.values():
        if t.name in db.table_names():
            continue
        columns = {c.name: {"INTEGER": int, "REAL": float, "TEXT": str}[c.type] for c in t.columns}
        db.table(t.name).create(columns, pk=primary_key(t), not_null=None)
    set_info(db, "schema_version", str(SCHEMA_VERSION))


def primary_key(t: Table) -> str | tuple[str, ...] | None:
    """A built table's key is unique per tree: (key, source_id), so several trees share a table
    (key first: a lookup by key alone still uses the index)."""
    if t.pk and t.kind == BUILT and "source_id" in t.column_names():
        return (*((t.pk,) if isinstance(t.pk, str) else t.pk), "source_id")
    return t.pk


def create_indexes(db: sqlite_utils.Database, tables: Iterable[str] | None = None) -> None:
    """Every declared index (of `tables` only, when given); existing ones are kept."""
    wanted = None if tables is None else set(tables)
    for t in TABLES.values():
        if wanted is not None and t.name not in wanted:
            continue
        per_tree = t.kind == BUILT and "source_id" in t.column_names()
        for cols in t.indexes:
            # a read is scoped to one tree (ckkb.kb.trees): the index narrows to its rows too
            extra = ["source_id"] if per_tree and "source_id" not in cols else []
            db.table(t.name).create_index([*cols, *extra], if_not_exists=True)


def create_fts(
    db: sqlite_utils.Database, tables: Iterable[str] | None = None, fresh: Iterable[str] = ()
) -> None:
    """Full-text indexes of every table that declares one (of `tables` only, when given), built
    from the rows now in the table; those named in `fresh` are known to be up to date already."""
    wanted = None if tables is None else set(tables)
    skip = set(fresh)
    for t in TABLES.values():
        if not t.fts or t.name in skip or (wanted is not None and t.name not in wanted):
            continue
        if not db.table(t.name).detect_fts():
            db.table(t.name).enable_fts(list(t.fts), create_triggers=False)
        else:
            db.table(t.name).rebuild_fts()


def view_sql() -> list[tuple[str, str]]:
    """(name, sql) of every view file in ckkb/queries/views, in name order."""
    out = []
    for f in sorted(
        resources.files("ckkb.queries").joinpath("views").iterdir(), key=lambda p: p.name
    ):
        if f.name.endswith(".sql"):
            out.append((f.name[:-4], f.read_text()))
    return out


def create_views(db: sqlite_utils.Database) -> None:
    for name, sql in view_sql():
        db.execute(f"DROP VIEW IF EXISTS [{name}]")
        db.executescript(sql)


def finish_schema(db: sqlite_utils.Database, fts_fresh: Iterable[str] = ()) -> None:
    create_indexes(db)
    create_fts(db, fresh=fts_fresh)
    write_vocabulary(db)
    create_views(db)


def write_vocabulary(db: sqlite_utils.Database) -> None:
    """The data-type vocabulary as a table, so SQL reads the one vocabulary Python reads."""
    rows = [(s, d.name, d.label, d.cpp) for d in vocabulary.DTYPES for s in sorted(d.spellings)]
    with db.conn:
        db.conn.execute("delete from dtype_spellings")
        db.conn.executemany(
            "insert into dtype_spellings (spelling, dtype, label, cpp) values (?, ?, ?, ?)", rows
        )


def set_info(db: sqlite_utils.Database, key: str, value: str) -> None:
    db.table("build_info").upsert({"key": key, "value": value}, pk="key")


def get_info(db: sqlite_utils.Database, key: str) -> str | None:
    if "build_info" not in db.table_names():
        return None
    rows = list(db.query("select value from build_info where key = ?", [key]))
    return rows[0]["value"] if rows else None


def open_db(
    path: str | Path, *, create: bool = False, readonly: bool = False, tree: str | None = None
) -> sqlite_utils.Database:
    """Open a knowledge base, checking it exists and has this ckkb's schema version.

    create=True makes an empty knowledge base (all tables, no rows) when the file is missing, which
    is what ingestion into a fresh location needs. It reads one tree of each kind
    (`ckkb.kb.trees.scope`): `tree`, else the first built.
    """
    sqlite_utils = (
        sqlite_utils_module()
    )  # lazily: a CLI that never opens a database never pays for it
    path = Path(path)
    if not path.exists() and os.path.lexists(path):  # a dangling or looping symlink
        validate.check_path(path, "knowledge base")
    if not path.exists():
        if not create:
            raise DatabaseError(f"knowledge base not found: {path}", hint=BUILD_HINT)
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite_utils.Database(path)
        create_tables(db)
        finish_schema(db)
        return db
    if path.is_dir():
        raise DatabaseError(f"{path} is a directory, not a knowledge base", hint=BUILD_HINT)
    try:
        if readonly:
            lock.recover(path)  # a hot journal of a killed writer: read-only cannot roll it back
            conn = sqlite3.connect(
                f"file:{path}?mode=ro",
                uri=True,
                check_same_thread=False,
                timeout=lock.BUSY_TIMEOUT_MS / 1000,
            )
            db = sqlite_utils.Database(conn)
        else:
            db = sqlite_utils.Database(path)
        version = get_info(db, "schema_version")
    except sqlite3.DatabaseError as e:
        raise DatabaseError(f"{path} is not a ckkb knowledge base ({e})", hint=BUILD_HINT) from None
    if version is None:
        raise DatabaseError(
            f"{path} is not a ckkb knowledge base (no build_info table)", hint=BUILD_HINT
        )
    if version != str(SCHEMA_VERSION):
        raise DatabaseError(
            f"{path} has schema version {version}; this ckkb reads version {SCHEMA_VERSION}",
            hint="rebuild it with `ckkb build` (ingested logs and bundles are carried over)",
        )
    # every connection reads one tree of each kind (writers write only ingested tables, which
    # are not scoped; a build writes a new file without this function)
    trees.scope(db.conn, tree)
    return db


def _json_encoder() -> Any:
    """json.dumps(v, default=str), minus the two objects json.dumps builds per call (an encoder and
    its C iterator): a build encodes 160,000 mostly small values, where that was 3/4 of the cost."""
    import json.encoder as je

    # typeshed leaves out the C accelerator's private name
    make_encoder = getattr(je, "c_make_encoder", None)
    if make_encoder is None:  # a Python without the C accelerator: same text, slower
        return lambda v: json.dumps(v, default=str)
    # the arguments JSONEncoder(default=str).iterencode passes, without the circular-reference check
    # (rows are built from parsed text: they hold no cycles)
    it = make_encoder(None, str, je.encode_basestring_ascii, None, ": ", ", ", False, False, True)
    return lambda v: "".join(it(v, 0))


to_json = _json_encoder()


def sql_value(v: Any) -> Any:
    """A Python value as SQLite stores it here: lists and dicts as JSON text, booleans as 0/1."""
    if isinstance(v, (dict, list, tuple)):
        return to_json(v)
    if isinstance(v, bool):
        return int(v)
    return v


def json_value(v: Any) -> Any:
    """A JSON column's text decoded (lists and objects); other values as they are."""
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def table_for(row: object) -> Table:
    row_class: Any = type(row)  # `__table__` is set by the @table decorator, unseen by mypy
    return TABLES[row_class.__table__]
