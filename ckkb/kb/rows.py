"""Stored rows read back as their row dataclasses, so code written against a build's rows (the
audit rules) runs the same on a knowledge base's."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

from ckkb.kb.schema import TABLES


def stored_rows(db: Any, table: str) -> list[Any]:
    """Every row of `table` as its dataclass: JSON columns decoded, booleans as bool, tuples as
    tuples, columns the dataclass does not have (`source_id`) left out."""
    t = TABLES[table]
    cls = t.row_class
    assert cls is not None, table
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    json_cols = {c.name for c in t.columns if c.json}
    convert = {name: _converter(hints[name], name in json_cols) for name in fields}
    cols = ", ".join(f"[{n}]" for n in fields)
    out = []
    for values in db.execute(f"select {cols} from [{table}] order by rowid").fetchall():
        out.append(cls(**{n: convert[n](v) for n, v in zip(fields, values, strict=True)}))
    return out


def _converter(tp: Any, is_json: bool) -> typing.Callable[[Any], Any]:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    base = args[0] if typing.get_origin(tp) in (typing.Union, type(int | None)) and args else tp
    if is_json and base is not str:  # the writer stores a str as it is, other values as JSON
        as_tuple = typing.get_origin(base) is tuple or base is tuple
        return lambda v: _json(v, as_tuple, loose=base is Any)
    if base is bool:
        return lambda v: None if v is None else bool(v)
    return lambda v: v


def _json(v: Any, as_tuple: bool, loose: bool) -> Any:
    """A JSON column's value; for an `Any` column (a str was stored as it is) only text that
    reads as a JSON list or object is decoded."""
    if not isinstance(v, str):
        return v
    if loose:
        if v[:1] not in "[{":
            return v
        try:
            d = json.loads(v)
        except ValueError:
            return v
    else:
        d = json.loads(v)
    return tuple(d) if as_tuple and isinstance(d, list) else d
