"""Row dataclasses declare the tables: one decorator, one source of truth for columns and docs.

Extractors build instances of these dataclasses (plain data, no SQLite); the kb layer turns the
class into `CREATE TABLE` and each instance into a row. Column docs feed `ckkb schema` and the
Datasette metadata.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

BUILT = "built"  # derived from source trees; rebuilt from scratch by `ckkb build`
INGESTED = "ingested"  # user data (logs, bundles); carried over by every rebuild

R = TypeVar("R", bound="DataclassInstance")


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # INTEGER | REAL | TEXT
    doc: str
    json: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    row_class: type | None
    pk: str | tuple[str, ...] | None = None
    indexes: tuple[tuple[str, ...], ...] = ()
    kind: str = BUILT
    fts: tuple[str, ...] = ()
    group: str = ""

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


TABLES: dict[str, Table] = {}

PROVENANCE_DOC = "id of the source tree (table `sources`) this row was read from"


def col(doc: str, default: Any = dataclasses.MISSING, *, json: bool = False) -> Any:
    """A documented column. JSON columns hold lists/dicts serialised as JSON text."""
    kwargs: dict[str, Any] = {"metadata": {"doc": doc, "json": json}}
    if default is not dataclasses.MISSING:
        if isinstance(default, (list, dict)):
            kwargs["default_factory"] = lambda d=default: type(d)(d)
        else:
            kwargs["default"] = default
    return field(**kwargs)


def _sql_type(tp: Any) -> tuple[str, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _sql_type(args[0]) if len(args) == 1 else ("TEXT", False)
    if tp is bool or tp is int:
        return "INTEGER", False
    if tp is float:
        return "REAL", False
    if tp is str:
        return "TEXT", False
    if origin in (list, dict, tuple) or tp in (list, dict, tuple, Any):
        return "TEXT", True
    return "TEXT", False


def table(
    name: str,
    doc: str,
    *,
    pk: str | tuple[str, ...] | None = None,
    indexes: tuple[tuple[str, ...], ...] = (),
    kind: str = BUILT,
    fts: tuple[str, ...] = (),
    group: str = "",
    provenance: bool | None = None,
) -> Callable[[type[R]], type[R]]:
    """Class decorator: register a dataclass as the row type of table `name`.

    Built tables get a `source_id` provenance column automatically (filled by the build).
    """

    def wrap(cls: type[R]) -> type[R]:
        hints = typing.get_type_hints(cls)
        cols: list[Column] = []
        for f in dataclasses.fields(cls):
            sql, is_json = _sql_type(hints[f.name])
            doc_ = f.metadata.get("doc", "")
            cols.append(Column(f.name, sql, doc_, bool(f.metadata.get("json")) or is_json))
        add_prov = (kind == BUILT) if provenance is None else provenance
        if add_prov and "source_id" not in [c.name for c in cols]:
            cols.append(Column("source_id", "INTEGER", PROVENANCE_DOC))
        if name in TABLES and TABLES[name].row_class is not cls:
            raise ValueError(f"table {name} declared twice")
        TABLES[name] = Table(
            name,
            doc,
            tuple(cols),
            cls,
            pk,
            indexes,
            kind,
            fts,
            group or cls.__module__.rsplit(".", 1)[-1],
        )
        registered: Any = cls  # mypy cannot see an attribute a decorator adds
        registered.__table__ = name
        return cls

    return wrap


def row_dict(obj: Any) -> dict[str, Any]:
    """A row dataclass as a dict ready for sqlite-utils (nested values stay lists/dicts)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
