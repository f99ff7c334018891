"""Questions over the knowledge base about printed instance names: which GetTypeString()
implementations have a schema (`coverage`), and which source entries print a name (`locate`).
The SQL is in canned/names_*.sql, shared with the web."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ckkb import vocabulary
from ckkb.errors import CkkbError
from ckkb.kb.db import json_value
from ckkb.names import NameSchema, SchemaSet, load_schemas, parse
from ckkb.queries import sql, text


def _query(db: Any, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in db.query(sql(name), params)]


def coverage(db: Any) -> dict[str, Any]:
    """How many GetTypeString() implementations have a name schema; which do not, and why."""
    rows = _query(db, "names_coverage", {"status": ""})
    by = {k: [r for r in rows if r["status"] == k] for k in ("matched", "partial", "unsupported")}

    def item(r: dict[str, Any]) -> dict[str, Any]:
        return {
            "device_op": r["device_op"],
            "op": r["op"],
            "file": r["file"],
            "line": r["line"],
            "reasons": json_value(r["reasons"]) or [],
        }

    return {
        "implementations": len(rows),
        "with_schema": len(by["matched"]) + len(by["partial"]),
        "matched": len(by["matched"]),
        "partial": len(by["partial"]),
        "unsupported": len(by["unsupported"]),
        "without_schema": [item(r) for r in by["unsupported"]],
        "partial_schemas": [item(r) for r in by["partial"]],
    }


def _dtype_ok(want: frozenset[str], a_dtype: str | None) -> bool | None:
    """True/False when the entry's A data type is known; None when the source leaves it open."""
    w = (a_dtype or "").rsplit("::", 1)[-1]
    if not w or w[0].isupper() and vocabulary.dtype(w) is None:
        return None  # empty or a template parameter name (ADataType, T): not decidable
    return w in want


def locate(
    db: Any, name: str, schemas: Mapping[str, NameSchema] | None = None, dtype: str | None = None
) -> dict[str, Any]:
    """The source entries (instance-list lines) whose printed name is `name`, with their
    registrations and per-arch availability. Printed names carry no data type, so lists of several
    types share names; `dtype` (ckProfiler's word: bf16, f16, fp8, ...) keeps the entries whose A
    type is that one (and those whose type the source leaves open). Raises CkkbError when the name
    cannot be keyed or dtype is unknown."""
    if schemas is None:
        schemas = load_schemas(db)
    p = parse(name, schemas)
    if p.schema == "error":
        raise CkkbError(f"cannot parse {name[:120]!r}: {p.error['message']}")  # type: ignore[index]
    if p.schema != "matched" or p.key is None:
        known = bool(schemas) and bool(
            (schemas if isinstance(schemas, SchemaSet) else SchemaSet(schemas)).candidates(
                p.op or ""
            )
        )
        why = (
            f"{p.op} is printed by a device op in this tree, but not in this form"
            " (an older CK release?)"
            if known
            else f"no GetTypeString() in this tree prints {p.op!r}"
        )
        raise CkkbError(
            f"cannot locate {name[:120]!r}: {why}",
            hint="`ckkb names coverage` lists the device ops whose names ckkb can read",
        )
    want = None
    if dtype:
        dt = vocabulary.dtype(dtype)
        if dt is None:
            names = ", ".join(sorted(d.name for d in vocabulary.DTYPES))
            raise CkkbError(f"unknown data type {dtype!r}", hint=f"one of {names}")
        want = dt.spellings
    rows = _query(db, "names_locate", {"key": p.key})
    if want is not None:
        rows = [r for r in rows if _dtype_ok(want, r["a_dtype"]) is not False]
    entries: dict[tuple[str, int], dict[str, Any]] = {}
    avail_cache: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        e = entries.setdefault(
            (r["file"], r["line"]),
            {
                "file": r["file"],
                "line": r["line"],
                "list": r["list_name"],
                "list_id": r["list_id"],
                "template": r["template"],
                "dir": r["dir"],
                "instance_id": r["instance_id"],
                "a_dtype": r["a_dtype"],
                "status": r["status"],
                "reason": r["reason"] or "",
                "printed_name": r["printed_name"],
                "registrations": [],
            },
        )
        rid = r["registration_id"]
        if rid is None:
            continue
        key = (rid, r["instance_id"])
        if key not in avail_cache:
            # the registration's availability for this entry: an #if inside the list that
            # drops the entry on an arch counts (instance_gates), as in why and pool
            params = {"ids": json.dumps([rid]), "instance_id": r["instance_id"]}
            avail_cache[key] = {
                a["arch"]: {
                    "available": bool(a["available"]),
                    "layer": a["layer"],
                    "file": a["file"],
                    "line": a["line"],
                    "condition": a["condition"],
                }
                for a in db.query(text("instance", "availability"), params)
            }
        e["registrations"].append(
            {
                "id": rid,
                "function": r["function"],
                "file": r["registration_file"],
                "line": r["registration_line"],
                "bindings": json_value(r["bindings"]) or {},
                "condition": r["condition"],
                "availability": avail_cache[key],
            }
        )
    out = list(entries.values())
    active = [e for e in out if e["status"] == "active"]
    return {
        "name": name,
        "op": p.op,
        "device_op": p.device_op,
        "device_ops": list(p.device_ops),
        "key": p.key,
        "fields": p.fields,
        "derived": p.derived,
        "dtype": dtype,
        "entries": out,
        "ambiguous": len(active) > 1,
    }
