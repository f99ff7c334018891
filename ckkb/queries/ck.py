"""CK questions over the knowledge base: gates, instances, why, pool counts.

Thin wrappers over the canned SQL in ckkb/queries/canned (gate_census, why_missing, pool_counts)
and the views ck_instance_availability / ck_gemm_layouts: the CLI and the web run the same SQL.
Each function returns the JSON-contract dict the CLI prints with --json.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from ckkb.archs import ARCHS
from ckkb.errors import CkkbError
from ckkb.fields import NORMALISED, enum_word
from ckkb.kb.db import json_value
from ckkb.queries import sql
from ckkb.queries.evidence import dress, reasons
from ckkb.queries.evidence import facts as evidence_facts
from ckkb.vocabulary import LAYOUTS, cpp_type

if TYPE_CHECKING:
    import sqlite_utils

_TILE = re.compile(r"^\s*(\d+)\s*[xX*]\s*(\d+)\s*[xX*]\s*(\d+)\s*$")


class QueryError(CkkbError):
    """Bad query input (unknown arch, malformed tile, unknown field)."""


def known_archs(db: sqlite_utils.Database | None) -> tuple[list[str], list[str]]:
    """(archs the tree knows, those availability is computed for), from the tree_archs table;
    ckkb.archs.ARCHS for both when the knowledge base predates it."""
    if db is None or "tree_archs" not in db.table_names():
        return list(ARCHS), list(ARCHS)
    rows = list(db.query("SELECT arch, evaluated FROM tree_archs ORDER BY length(arch), arch"))
    if not rows:
        return list(ARCHS), list(ARCHS)
    return [r["arch"] for r in rows], [r["arch"] for r in rows if r["evaluated"]]


def archs(db: sqlite_utils.Database) -> dict[str, Any]:
    """{"archs": [{"arch", "file", "line", "source", "families", "evaluated"}]}: the targets the
    tree names, each with the first file:line naming it."""
    if "tree_archs" not in db.table_names():
        raise QueryError(
            "this knowledge base predates `ckkb archs`", hint="rebuild it: ckkb build --force"
        )
    rows = db.query(
        "SELECT arch, file, line, source, families, evaluated FROM tree_archs "
        "ORDER BY length(arch), arch"
    )
    return {
        "archs": [
            dict(r, families=json_value(r["families"]) or [], evaluated=bool(r["evaluated"]))
            for r in rows
        ]
    }


def check_arch(
    arch: str | None, required: bool = False, db: sqlite_utils.Database | None = None
) -> str | None:
    """The arch, when the tree knows it and answers for it; else a plain QueryError."""
    known, evaluated = known_archs(db)
    if arch is None:
        if required:
            raise QueryError("--arch is required", hint=f"one of: {', '.join(evaluated)}")
        return None
    if arch not in known:
        raise QueryError(
            f"unknown arch {arch!r}: this tree does not know {arch}; it knows {', '.join(known)}",
            hint="the archs and where the tree names them: ckkb archs",
        )
    if arch not in evaluated:
        raise QueryError(
            f"this tree names {arch} but its CMake does not build for it; "
            f"it builds for {', '.join(evaluated)}",
            hint="the archs and where the tree names them: ckkb archs",
        )
    return arch


def parse_tile(tile: str | None) -> tuple[int, int, int] | None:
    """'256x224x64' -> (256, 224, 64): MPerBlock x NPerBlock x KPerBlock."""
    if tile is None or tile == "":
        return None
    m = _TILE.match(tile)
    if not m:
        raise QueryError(
            f"bad --tile {tile!r}: expected MxNxK, e.g. "
            "256x224x64 (MPerBlock x NPerBlock x KPerBlock)"
        )
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def parse_where(items: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for it in items or ():
        if "=" not in it:
            raise QueryError(f"bad filter {it!r}: expected FIELD=VALUE, e.g. MPerBlock=256")
        k, v = it.split("=", 1)
        k, v = k.strip(), v.strip()
        if not k or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise QueryError(f"bad field name {k!r} in {it!r}")
        out.append((k, v))
    return out


def _known_field(db: sqlite_utils.Database, name: str) -> bool:
    if name in NORMALISED or name in ("template", "list_name", "status", "dir"):
        return True
    rows = db.execute(
        "SELECT 1 FROM instances, json_each(instances.fields) j WHERE j.key = ? LIMIT 1", [name]
    ).fetchall()
    return bool(rows)


def _filters(
    db: sqlite_utils.Database, where: list[tuple[str, str]], dir: str | None
) -> tuple[str, list[Any]]:
    """SQL WHERE text over `instances i` for --dir and FIELD=VALUE filters."""
    clauses, params = [], []
    if dir:
        clauses.append("i.dir = ?")
        params.append(dir)
    for k, v in where:
        if not _known_field(db, k):
            raise QueryError(
                f"unknown field {k!r}",
                hint="use a CK template parameter name (MPerBlock, BlockSize, "
                "...) or a normalised column (tile_m, block_size, ...)",
            )
        if k in NORMALISED or k in ("template", "list_name", "status", "dir"):
            expr = f"CAST(i.[{k}] AS TEXT)"
        else:
            expr = f"CAST(json_extract(i.fields, '$.\"{k}\"') AS TEXT)"
        clauses.append(f"({expr} = ? OR {expr} LIKE ?)")
        params.extend([v, f"%::{v}"])
    return (" AND ".join(clauses) or "1"), params


# ---------------------------------------------------------------- gates


def gates(
    db: sqlite_utils.Database, kind: str | None = None, arch: str | None = None
) -> dict[str, Any]:
    """{"gates": [{"kind", "arch", "effect", "dir", "file", "line", "condition", "has_else"}]}."""
    check_arch(arch, db=db)
    q = "SELECT kind, arch, effect, dir, file, line, condition, has_else FROM gates WHERE 1"
    params: list[Any] = []
    if kind:
        q += " AND kind = ?"
        params.append(kind)
    if arch:
        q += " AND arch = ?"
        params.append(arch)
    q += " ORDER BY dir, file, line"
    rows = [dict(r, has_else=bool(r["has_else"])) for r in db.query(q, params)]
    return {"gates": rows}


def gate_census(
    db: sqlite_utils.Database, kind: str | None = None, arch: str | None = None
) -> list[dict[str, Any]]:
    check_arch(arch, db=db)
    return list(db.query(sql("gate_census"), {"kind": kind or "", "arch": arch or ""}))


# ---------------------------------------------------------------- instances


def _instance_dicts(
    db: sqlite_utils.Database,
    where_sql: str,
    params: list[Any],
    arch: str | None,
    limit: int | None = None,
    details: bool = True,
) -> list[dict[str, Any]]:
    """Instances with their registering calls and availability on `arch` (ckkb.queries.evidence);
    details=False leaves the JSON columns (fields, registration args) unread."""
    q = (
        "SELECT i.id, i.template, i.dir, i.file, i.line, i.list_name, "
        "i.list_id, l.comment AS list_comment, i.status, i.reason, i.fields "
        "FROM instances i LEFT JOIN instance_lists l ON l.id = "
        f"i.list_id WHERE {where_sql} ORDER BY i.dir, i.file, i.line"
    )
    if limit:
        q += f" LIMIT {int(limit)}"
    rows = list(db.query(q, params))
    known = evidence_facts(db.conn, rows, [arch] if arch else [])
    return [dress(r, known, arch, details) for r in rows]


def _public(inst: dict[str, Any]) -> dict[str, Any]:
    d = {k: v for k, v in inst.items() if k not in ("id", "reason")}
    d["registrations"] = [
        {k: v for k, v in g.items() if not k.startswith("_")} for g in inst["registrations"]
    ]
    return d


def instances(
    db: sqlite_utils.Database,
    dir: str | None = None,
    where: list[str] | tuple[str, ...] = (),
    arch: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """{"arch", "instances": [{"template", "dir", "file", "line", "list", "list_comment", "status",
    "fields", "registrations": [{"function", "file", "line", "args", "available"}],
    "available"}]}."""
    check_arch(arch, db=db)
    wsql, params = _filters(db, parse_where(where), dir)
    return {
        "arch": arch,
        "instances": [_public(i) for i in _instance_dicts(db, wsql, params, arch, limit)],
    }


# ---------------------------------------------------------------- why


def why(
    db: sqlite_utils.Database,
    tile: str | None = None,
    where: list[str] | tuple[str, ...] = (),
    arch: str | None = None,
    dir: str | None = None,
) -> dict[str, Any]:
    """{"arch", "query", "matches": [{"instance", "available", "reasons": [{"layer", "file", "line",
    "condition", "list", "list_comment"}]}], "nearest": [...]} (nearest only when nothing
    matches)."""
    check_arch(arch, required=True, db=db)
    t = parse_tile(tile)
    filters = parse_where(where)
    wsql, params = _filters(db, filters, dir)
    tile_sql = wsql
    if t:
        tile_sql += " AND i.tile_m = ? AND i.tile_n = ? AND i.tile_k = ?"
        params = [*params, *t]
    # the canned query decides which instances match the tile (the web runs the same SQL)
    ids = (
        {
            r["instance_id"]
            for r in db.query(
                sql("why_missing"), {"tile": "x".join(map(str, t)) if t else "", "arch": arch}
            )
        }
        if t
        else None
    )
    found = _instance_dicts(db, tile_sql, params, arch)
    if ids is not None:
        found = [i for i in found if i["id"] in ids]
    query = {"tile": "x".join(map(str, t)) if t else None, "where": dict(filters), "dir": dir}
    matches = [
        {
            "instance": _public(i),
            "available": bool(i["available"]),
            "reasons": [] if i["available"] else reasons(i),
        }
        for i in found
    ]
    out: dict[str, Any] = {"arch": arch, "query": query, "matches": matches}
    if not matches:
        out["nearest"] = nearest(db, t, filters, dir, arch)
    return out


def nearest(
    db: sqlite_utils.Database,
    t: tuple[int, int, int] | None,
    filters: list[tuple[str, str]],
    dir: str | None,
    arch: str | None,
    n: int = 5,
) -> list[dict[str, Any]]:
    """Closest existing instances by tile distance (sum of |log2| ratios), other filters relaxed."""
    if t is None:
        return []
    wsql, params = _filters(
        db, [f for f in filters if f[0] not in ("MPerBlock", "NPerBlock", "KPerBlock")], dir
    )
    q = (
        "SELECT i.id, i.tile_m, i.tile_n, i.tile_k FROM instances i "
        f"WHERE {wsql} AND i.tile_m > 0 AND i.tile_n > 0 AND i.tile_k > 0 "
        "AND i.status = 'active'"
    )

    def dist(r: dict[str, Any]) -> float:
        return sum(
            abs(math.log2(a / b))
            for a, b in zip((r["tile_m"], r["tile_n"], r["tile_k"]), t, strict=True)
        )

    rows = sorted(db.query(q, params), key=lambda r: (dist(r), r["id"]))
    seen_tiles, pick = set(), []
    tiles = {r["id"]: f"{r['tile_m']}x{r['tile_n']}x{r['tile_k']}" for r in rows}
    for r in rows:
        key = (r["tile_m"], r["tile_n"], r["tile_k"])
        if key not in seen_tiles:
            seen_tiles.add(key)
            pick.append(r["id"])
        if len(pick) >= n:
            break
    if not pick:
        return []
    marks = ",".join("?" * len(pick))
    found = {i["id"]: i for i in _instance_dicts(db, f"i.id IN ({marks})", pick, arch)}
    return [dict(_public(found[i]), tile=tiles[i]) for i in pick if i in found]


# ---------------------------------------------------------------- pool


def pool_counts(
    db: sqlite_utils.Database, dir: str = "gemm_universal", dtype: str | None = "bf16"
) -> dict[str, Any]:
    """{"dir", "dtype", "layouts", "counts": {arch: {layout:
    available pairs}}, "instances": {arch: {layout: n}}}."""
    ctype = ""
    if dtype:
        ctype = cpp_type(dtype)
    archs = known_archs(db)[1]
    counts = {a: dict.fromkeys(LAYOUTS, 0) for a in archs}
    inst = {a: dict.fromkeys(LAYOUTS, 0) for a in archs}
    for r in db.query(sql("pool_counts"), {"dir": dir, "dtype": ctype}):
        if r["arch"] in counts and r["layout"] in LAYOUTS:
            counts[r["arch"]][r["layout"]] = r["available"] or 0
            inst[r["arch"]][r["layout"]] = r["instances"] or 0
    return {
        "dir": dir,
        "dtype": dtype,
        "layouts": list(LAYOUTS),
        "counts": counts,
        "instances": inst,
    }


def pool(db: sqlite_utils.Database, dir: str, arch: str) -> list[dict[str, Any]]:
    """The pool canned query's rows, each arch of `per_arch` also as a key of its own."""
    check_arch(arch, required=True, db=db)
    rows = [dict(r) for r in db.query(sql("pool"), {"dir": dir, "arch": arch})]
    for r in rows:
        r.update(json_value(r["per_arch"]) or {})
    return rows


def arch_diff(db: sqlite_utils.Database, arch_a: str, arch_b: str) -> list[dict[str, Any]]:
    check_arch(arch_a, required=True, db=db)
    check_arch(arch_b, required=True, db=db)
    return list(db.query(sql("arch_diff"), {"arch_a": arch_a, "arch_b": arch_b}))


def short(value: Any) -> str:
    """Enum-ish values for human tables: BlockGemmPipelineVersion::v3 -> v3."""
    return enum_word(value) or ""
