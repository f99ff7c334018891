"""What changed between two CK trees besides the instances: gates, registering calls, ckProfiler
ops. Each is read from one tree's scoped connection with the same lookup and paired by identity
(`pairing.pair`): the row's content, never its file or line.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ckkb.kb.db import json_value
from ckkb.queries import rows
from ckkb.versions.pairing import Row, pair, where

if TYPE_CHECKING:
    import sqlite3

# identity of a gate: what it tests and what it guards, where (dir and add function)
GATE_KEY = ("kind", "arch", "effect", "dir", "function", "condition", "has_else")
# identity of a registering call: which list, with which arguments, in which function, under what
REGISTRATION_KEY = ("dir", "function", "list_name", "args", "condition")
# what `changed` compares of a ckProfiler op of the same name (not where it is written)
PROFILER_FIELDS = (
    "description",
    "function",
    "gemm_family",
    "usage",
    "legend_kind",
    "positional_args",
    "argc_allowed",
    "impl_headers",
    "interfaces",
)


def _key(fields: tuple[str, ...]) -> Any:
    return lambda r: tuple(r[f] for f in fields)


def _item(r: Row, fields: tuple[str, ...], side: str) -> dict[str, Any]:
    out = {f: _json(r[f]) for f in fields}
    out["from"] = where(r) if side == "from" else None
    out["to"] = where(r) if side == "to" else None
    return out


def _json(v: Any) -> Any:
    return json_value(v) if isinstance(v, str) and v[:1] in "[{" else v


def gates(
    old: sqlite3.Connection,
    new: sqlite3.Connection,
    dir: str,
    archs: list[str] | None,
    functions: tuple[set[str], set[str]] | None,
) -> dict[str, list[dict[str, Any]]]:
    """{"added", "removed"}: gates of one tree only. `archs`: keep gates naming one of them or no
    arch; `functions`: keep only gates inside these add functions (per tree), when given."""

    def read(conn: sqlite3.Connection, side: int) -> list[Row]:
        out = []
        for r in rows(conn, "lookups", "diff_gates", {"dir": dir}):
            if archs is not None and r["arch"] is not None and r["arch"] not in archs:
                continue
            if functions is not None and r["function"] not in functions[side]:
                continue
            out.append(dict(r, has_else=bool(r["has_else"])))
        return out

    added, removed, _ = pair(read(old, 0), read(new, 1), _key(GATE_KEY))
    return {
        "added": [_item(r, GATE_KEY, "to") for r in added],
        "removed": [_item(r, GATE_KEY, "from") for r in removed],
    }


def registrations(
    old: sqlite3.Connection, new: sqlite3.Connection, params: dict[str, str]
) -> tuple[dict[str, list[dict[str, Any]]], tuple[set[str], set[str]]]:
    """({"added", "removed"}: registering calls of one tree only, the add functions holding the
    calls compared in each tree). `params`: dir, dtype (C++ type), layout; '' = any."""
    a = rows(old, "lookups", "diff_registrations", params)
    b = rows(new, "lookups", "diff_registrations", params)
    added, removed, _ = pair(a, b, _key(REGISTRATION_KEY))
    fields = REGISTRATION_KEY
    out = {
        "added": [_rename(_item(r, fields, "to")) for r in added],
        "removed": [_rename(_item(r, fields, "from")) for r in removed],
    }
    return out, ({r["function"] for r in a}, {r["function"] for r in b})


def _rename(item: dict[str, Any]) -> dict[str, Any]:
    item["list"] = item.pop("list_name")
    return item


def profiler_ops(old: sqlite3.Connection, new: sqlite3.Connection) -> dict[str, Any]:
    """{"added", "removed", "changed"}: ckProfiler ops by name; changed lists the fields whose
    value differs, with both values."""
    a = {r["name"]: r for r in rows(old, "lookups", "diff_profiler_ops")}
    b = {r["name"]: r for r in rows(new, "lookups", "diff_profiler_ops")}
    out: dict[str, Any] = {
        "added": [_op(b[n], None) for n in sorted(set(b) - set(a))],
        "removed": [_op(None, a[n]) for n in sorted(set(a) - set(b))],
        "changed": [],
    }
    for n in sorted(set(a) & set(b)):
        diff = {
            f: {"from": _json(a[n][f]), "to": _json(b[n][f])}
            for f in PROFILER_FIELDS
            if _canon(a[n][f]) != _canon(b[n][f])
        }
        if diff:
            out["changed"].append(dict(_op(b[n], a[n]), changes=diff))
    return out


def _op(new: Row | None, old: Row | None) -> dict[str, Any]:
    r = new or old
    assert r is not None
    return {
        "name": r["name"],
        "description": r["description"],
        "from": where(old) if old else None,
        "to": where(new) if new else None,
    }


def _canon(v: Any) -> Any:
    """A JSON column compares by value, not by its text."""
    return json.dumps(_json(v), sort_keys=True) if isinstance(v, str) else v
