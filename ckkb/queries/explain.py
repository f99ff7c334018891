"""Everything the explain page shows about one instance, read from the knowledge base.

`explain(conn, id)` is plain Python over a sqlite3 connection (the plugin runs it through
Datasette's read-only connection; tests call it directly) over a knowledge base of the current
schema (ckkb.kb.db.open_db checks the version). Its SQL is ckkb/queries/instance/*.sql.
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from typing import Any

from ckkb import queries, settings, vocabulary
from ckkb.archs import ARCHS
from ckkb.fields import NORMALISED

INSTANCE_COLUMNS_SHOWN = (
    "template",
    "status",
    "reason",
    "dir",
    "list_name",
    "ordinal",
    *NORMALISED,
)


def _rows(conn: sqlite3.Connection, name: str, params: Any = None) -> list[dict[str, Any]]:
    return queries.rows(conn, "instance", name, params)


def _json(v: Any, default: Any) -> Any:
    if v is None or v == "":
        return default
    if not isinstance(v, str):
        return v
    try:
        return json.loads(v)
    except ValueError:
        return default


def source_url(file: str | None, line: int | None, base: str | None = None) -> str | None:
    """`$CKKB_CK_REPO_URL/<file>#L<line>`, or None when no repository URL is configured."""
    base = settings.get("CKKB_CK_REPO_URL") if base is None else base
    if not base or not file:
        return None
    url = f"{base.rstrip('/')}/{file.lstrip('/')}"
    return f"{url}#L{line}" if line else url


def explain(
    conn: sqlite3.Connection, instance_id: int, links: dict[int, list[int]] | None = None
) -> dict[str, Any] | None:
    """The explain page's data for one instance, or None when there is no such instance."""
    found = _rows(conn, "instance", {"id": instance_id})
    if not found:
        return None
    inst = found[0]
    inst["fields"] = _json(inst.get("fields"), {})
    inst["args"] = _json(inst.get("args"), [])
    out: dict[str, Any] = {
        "instance": inst,
        "summary": [
            (c, inst.get(c))
            for c in INSTANCE_COLUMNS_SHOWN
            if c in inst and inst.get(c) not in (None, "")
        ],
        "source": {
            "file": inst.get("file"),
            "line": inst.get("line"),
            "url": source_url(inst.get("file"), inst.get("line")),
        },
        "list": None,
        "printed_names": [
            r["printed_name"] for r in _rows(conn, "printed_names", {"id": instance_id})
        ],
        "registrations": [],
        "gates": [],
        "arch_table": [],
        "races": [],
        "race_note": None,
    }
    lst = _rows(conn, "instance_list", {"list_id": inst.get("list_id")})
    if lst:
        out["list"] = lst[0]
        out["list"]["url"] = source_url(lst[0].get("file"), lst[0].get("line"))
    out["registrations"] = _registrations(conn, inst)
    out["gates"] = _gates(conn, out["registrations"])
    out["arch_table"] = _arch_table(conn, out["registrations"], instance_id)
    out["races"], out["race_note"] = _races(conn, inst, links)
    return out


def _registrations(conn: sqlite3.Connection, inst: dict[str, Any]) -> list[dict[str, Any]]:
    regs = _rows(
        conn,
        "registrations",
        {"list_id": inst.get("list_id"), "list_name": inst.get("list_name")},
    )
    for r in regs:
        r["conditions"] = _json(r.get("conditions"), [])
        r["bindings"] = _json(r.get("bindings"), {})
        r["url"] = source_url(r.get("file"), r.get("line"))
        for c in r["conditions"]:
            if isinstance(c, dict):
                c["url"] = source_url(c.get("file") or r.get("file"), c.get("line"))
    return regs


def _gates(conn: sqlite3.Connection, regs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gate rows that guard any of the registrations: by the (file, line) their conditions name,
    else every gate in the same add function of the same file."""
    if not regs:
        return []
    seen: OrderedDict[int, dict[str, Any]] = OrderedDict()
    for r in regs:
        keys = [
            (c.get("file") or r.get("file"), c.get("line"))
            for c in r["conditions"]
            if isinstance(c, dict) and c.get("line")
        ]
        found: list[dict[str, Any]] = []
        for f, ln in keys:
            found += _rows(conn, "gates_at", {"file": f, "line": ln})
        if not found and r.get("function"):
            found = _rows(
                conn, "gates_in_function", {"file": r.get("file"), "function": r.get("function")}
            )
        for g in found:
            g["url"] = source_url(g.get("file"), g.get("line"))
            seen.setdefault(g["id"], g)
    return list(seen.values())


def _arch_table(
    conn: sqlite3.Connection, regs: list[dict[str, Any]], instance_id: int
) -> list[dict[str, Any]]:
    """One row per arch: available on it through any registration, else the first evidence
    (an #if inside the list that drops the instance on the arch counts, as in why and pool)."""
    if not regs:
        return []
    ids = json.dumps([r["id"] for r in regs])
    rows = _rows(conn, "availability", {"ids": ids, "instance_id": instance_id})
    by_arch: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    try:  # the tree's archs; a knowledge base older than tree_archs: ckkb.archs.ARCHS
        tree = [r["arch"] for r in _rows(conn, "archs")]
    except sqlite3.OperationalError:
        tree = list(ARCHS)
    order = {a: i for i, a in enumerate(tree)}
    for r in sorted(rows, key=lambda r: (order.get(r["arch"], 99), r["arch"])):
        by_arch.setdefault(r["arch"], []).append(r)
    out = []
    for arch, items in by_arch.items():
        avail = [r for r in items if r.get("available")]
        missing = [r for r in items if not r.get("available")]
        ev = None if avail else (missing[0] if missing else None)
        out.append(
            {
                "arch": arch,
                "available": bool(avail),
                "registrations": f"{len(avail)} of {len(items)}",
                "layer": ev.get("layer") if ev else None,
                "file": ev.get("file") if ev else None,
                "line": ev.get("line") if ev else None,
                "condition": ev.get("condition") if ev else None,
                "url": source_url(ev.get("file"), ev.get("line")) if ev else None,
            }
        )
    return out


def race_links(conn: sqlite3.Connection) -> dict[int, list[int]]:
    """race_results.id -> the instances `ckkb locate --dtype <the race's dtype> NAME` finds
    (ckkb.queries.names.locate itself: the result's printed name keyed with this tree's
    GetTypeString() schemas, entries kept by the race's data type). Names printed by another CK
    release, or that no schema keys, link to nothing. Computed once per served (immutable)
    knowledge base."""
    import sqlite_utils

    from ckkb.errors import CkkbError
    from ckkb.names import load_schemas
    from ckkb.queries.names import locate

    db = sqlite_utils.Database(conn)
    schemas = load_schemas(db)
    if not schemas:
        return {}
    found: dict[tuple[str, str | None], list[int]] = {}
    out: dict[int, list[int]] = {}
    for r in _rows(conn, "race_result_names"):
        dtype = r["dtype"] or None
        if vocabulary.dtype(dtype) is None:
            dtype = None  # no data type, or a word the log parser misread: locate without one
        key = (r["name"], dtype)
        if key not in found:
            try:
                located = locate(db, r["name"], schemas, dtype=dtype)
            except CkkbError:
                found[key] = []
            else:
                entries = located["entries"]
                active = [e for e in entries if e["status"] == "active"] or entries
                found[key] = [e["instance_id"] for e in active]
        if found[key]:
            out[r["id"]] = found[key]
    return out


def _races(
    conn: sqlite3.Connection, inst: dict[str, Any], links: dict[int, list[int]] | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """Race results of this instance, through the names join (race_links: what `ckkb locate`
    finds for each result's printed name)."""
    if not _rows(conn, "any_race_result"):
        return (
            [],
            "no race results in this knowledge base (ingest ckProfiler logs with `ckkb ingest`)",
        )
    if links is None:
        links = race_links(conn)
    ids = [rid for rid, iids in links.items() if inst["id"] in iids]
    if not ids:
        return (
            [],
            "no ingested race result's printed name matches this instance "
            "(names join: instance_keys)",
        )
    return _rows(conn, "race_results", {"ids": json.dumps(ids)}), None


def identity_availability(conn: sqlite3.Connection, inst: dict[str, Any]) -> dict[str, Any] | None:
    """Where the tree `conn` reads has the instance `inst` (of any tree) by identity (same device
    op, same resolved arguments): its matching instance ids and, per arch, whether any active
    match is available and else the first evidence (`_arch_table`). None when it has no match."""
    resolved = inst.get("resolved")
    if not isinstance(resolved, str):
        resolved = json.dumps(resolved)
    same = _rows(conn, "same_identity", {"template": inst.get("template"), "resolved": resolved})
    if not same:
        return None
    active = [r for r in same if r["status"] == "active"]
    archs: dict[str, dict[str, Any]] = {}
    for r in active or same:  # a commented-out entry: its list's calls (the archs to show)
        for a in _arch_table(conn, _registrations(conn, r), r["id"]):
            if a["arch"] not in archs or (a["available"] and not archs[a["arch"]]["available"]):
                archs[a["arch"]] = a  # available through any match, else the first evidence
    return {
        "id": same[0]["id"],
        "ids": [r["id"] for r in same],
        "status": "active" if active else same[0]["status"],
        "archs": archs,
    }
