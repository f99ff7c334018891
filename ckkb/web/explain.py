"""Everything the explain page shows about one instance, read from the knowledge base.

`explain(conn, id)` is plain Python over a sqlite3 connection (the plugin runs it through
Datasette's read-only connection; tests call it directly). It reads only tables and columns that
exist, so a knowledge base without races (or without the names join tables) still explains.
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from typing import Any

from ckkb import settings
from ckkb.archs import ARCHS

INSTANCE_COLUMNS_SHOWN = (
    "template",
    "status",
    "reason",
    "dir",
    "list_name",
    "ordinal",
    "a_layout",
    "b_layout",
    "c_layout",
    "a_dtype",
    "b_dtype",
    "c_dtype",
    "block_size",
    "tile_m",
    "tile_n",
    "tile_k",
    "mfma_m",
    "mfma_n",
    "xdl_m",
    "xdl_n",
    "waves_m",
    "waves_n",
    "ak1",
    "bk1",
    "pipeline",
    "scheduler",
    "padding",
)


def _tables(conn: sqlite3.Connection) -> dict[str, set[str]]:
    names = [
        r[0] for r in conn.execute("select name from sqlite_master where type in ('table', 'view')")
    ]
    return {n: {r[1] for r in conn.execute(f"pragma table_info([{n}])")} for n in names}


def _rows(conn: sqlite3.Connection, sql: str, params: Any = ()) -> list[dict[str, Any]]:
    cur = conn.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


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
    tables = _tables(conn)
    if "instances" not in tables:
        return None
    found = _rows(conn, "select * from instances where id = ?", [instance_id])
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
        "registrations": [],
        "gates": [],
        "arch_table": [],
        "races": [],
        "race_note": None,
    }
    if "instance_lists" in tables:
        lst = _rows(conn, "select * from instance_lists where id = ?", [inst.get("list_id")])
        if lst:
            out["list"] = lst[0]
            out["list"]["url"] = source_url(lst[0].get("file"), lst[0].get("line"))
    out["registrations"] = _registrations(conn, tables, inst)
    out["gates"] = _gates(conn, tables, out["registrations"])
    out["arch_table"] = _arch_table(conn, tables, out["registrations"], inst)
    out["races"], out["race_note"] = _races(conn, tables, inst, links)
    return out


def _registrations(conn, tables, inst) -> list[dict[str, Any]]:
    if "registrations" not in tables:
        return []
    regs = _rows(
        conn,
        "select * from registrations where list_id = ? or (list_id is null and list_name = ?) order by file, line",
        [inst.get("list_id"), inst.get("list_name")],
    )
    for r in regs:
        r["conditions"] = _json(r.get("conditions"), [])
        r["bindings"] = _json(r.get("bindings"), {})
        r["url"] = source_url(r.get("file"), r.get("line"))
        for c in r["conditions"]:
            if isinstance(c, dict):
                c["url"] = source_url(c.get("file") or r.get("file"), c.get("line"))
    return regs


def _gates(conn, tables, regs) -> list[dict[str, Any]]:
    """Gate rows that guard any of the registrations: by the (file, line) their conditions name,
    else every gate in the same add function of the same file."""
    if "gates" not in tables or not regs:
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
            found += _rows(conn, "select * from gates where file = ? and line = ?", [f, ln])
        if not found and r.get("function"):
            found = _rows(
                conn,
                "select * from gates where file = ? and function = ? order by line",
                [r.get("file"), r.get("function")],
            )
        for g in found:
            g["url"] = source_url(g.get("file"), g.get("line"))
            seen.setdefault(g["id"], g)
    return list(seen.values())


def _arch_table(conn, tables, regs, inst) -> list[dict[str, Any]]:
    """One row per arch: available on it through any registration, else the first evidence."""
    if "availability" not in tables or not regs:
        return []
    ids = [r["id"] for r in regs]
    marks = ",".join("?" * len(ids))
    rows = _rows(
        conn,
        f"select * from availability where registration_id in ({marks}) order by arch, registration_id",
        ids,
    )
    by_arch: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    order = {a: i for i, a in enumerate(ARCHS)}
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


RACE_COLUMNS = ("op", "dtype", "layout", "M", "N", "K", "arch", "gpu")


# ckProfiler's data-type labels -> the C++ names instance fields carry (after alias resolution).
RACE_DTYPES: dict[str, tuple[str, ...]] = {
    "fp16": ("half_t", "F16", "ck::half_t"),
    "bf16": ("bhalf_t", "BF16", "ck::bhalf_t"),
    "fp32": ("float", "F32"),
    "int8": ("int8_t", "I8"),
    "fp8": ("f8_t", "F8", "ck::f8_t", "f8_fnuz_t", "ck::f8_fnuz_t", "f8_ocp_t", "ck::f8_ocp_t"),
    "bf8": (
        "bf8_t",
        "BF8",
        "ck::bf8_t",
        "bf8_fnuz_t",
        "ck::bf8_fnuz_t",
        "bf8_ocp_t",
        "ck::bf8_ocp_t",
    ),
}


def race_links(conn: sqlite3.Connection) -> dict[int, list[int]]:
    """race_results.id -> instances.id whose printed-name key matches (ckkb.names: the result's
    name parsed with the tree's GetTypeString() schemas, looked up in instance_keys). A printed
    name carries no data types, so when the race's dtype is known only instances whose A type is
    that dtype are kept. Computed once per served (immutable) knowledge base; names printed by
    another CK release match nothing."""
    tables = _tables(conn)
    if (
        "race_results" not in tables
        or "instance_keys" not in tables
        or "name_schemas" not in tables
    ):
        return {}
    import sqlite_utils

    from ckkb import names

    schemas = names.load_schemas(sqlite_utils.Database(conn))
    if not schemas:
        return {}
    dtype_of = {}
    if "races" in tables and "dtype" in tables["races"] and "race_id" in tables["race_results"]:
        dtype_of = dict(conn.execute("select id, dtype from races").fetchall())
    out: dict[int, list[int]] = {}
    key_hits: dict[str, list[tuple[int, str | None]]] = {}
    rows = conn.execute(
        "select id, name, race_id from race_results where name is not null and name != ''"
    ).fetchall()
    for rid, name, race_id in rows:
        p = names.parse(name, schemas)
        key = getattr(p, "key", None)
        if not key:
            continue
        if key not in key_hits:
            key_hits[key] = conn.execute(
                "select distinct k.instance_id, i.a_dtype from instance_keys k join instances i on i.id = k.instance_id "
                "where k.key = ? order by k.instance_id",
                [key],
            ).fetchall()
        hits = key_hits[key]
        want = RACE_DTYPES.get(dtype_of.get(race_id) or "")
        if want:
            hits_ids = [iid for iid, dt in hits if dt in want]
        else:
            hits_ids = [iid for iid, _ in hits]
        if hits_ids:
            out[rid] = hits_ids
    return out


def _races(
    conn, tables, inst, links: dict[int, list[int]] | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """Race results of this instance: directly by an instance_id column, or through the names
    join (race_links: printed-name key -> instance_keys)."""
    results = tables.get("race_results")
    if results is None or not _rows(conn, "select 1 as x from race_results limit 1"):
        return (
            [],
            "no race results in this knowledge base (ingest ckProfiler logs with `ckkb ingest`)",
        )
    race_cols = {c.lower(): c for c in tables.get("races", set())}
    pick = "rr.race_id, rr.name, rr.ms, rr.tflops, rr.gbps, rr.supported, rr.verified"
    pick = ", ".join(p for p in pick.split(", ") if p.split(".")[1] in results)
    extra = [race_cols[c.lower()] for c in RACE_COLUMNS if c.lower() in race_cols]
    join = ""
    if extra and "race_id" in results:
        pick += "".join(f", r.[{c}] as [{c}]" for c in extra)
        join = "left join races r on r.id = rr.race_id"
    order = " order by rr.tflops is null, rr.tflops desc" if "tflops" in results else ""
    if "instance_id" in results:
        rows = _rows(
            conn,
            f"select {pick} from race_results rr {join} where rr.instance_id = ?{order}",
            [inst["id"]],
        )
        return rows, None if rows else "no race result names this instance"
    if links is None:
        links = race_links(conn)
    ids = [rid for rid, iids in links.items() if inst["id"] in iids]
    if not ids:
        return (
            [],
            "no ingested race result's printed name matches this instance (names join: instance_keys)",
        )
    marks = ",".join("?" * len(ids))
    rows = _rows(
        conn, f"select {pick} from race_results rr {join} where rr.id in ({marks}){order}", ids
    )
    return rows, None
