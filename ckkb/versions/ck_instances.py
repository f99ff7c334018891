"""Instances added, removed or changed between two CK trees.

The lists come from the `version_diff` canned query (the same SQL Datasette serves), which pairs
instances by identity: the device-op template plus its resolved template arguments, never file or
line; the n-th occurrence in one tree pairs with the n-th in the other, in file order (a multiset).
Each item is then dressed from its own tree's scoped connection: fields, data types, availability
per arch and, for a changed one, `why`'s evidence in each tree (ckkb.queries.ck.evidence).

Why `resolved` (the arguments as written, the file's aliases resolved): the normalised columns and
the printed-name keys (instance_keys) leave arguments out, so different instances share them (the
wheel's CK: 13,395 distinct (template, resolved) against 7,424 distinct normalised rows and 10,689
printed-name keys); `fields` adds the op's defaults, so a header that gains a defaulted parameter
would change every instance. A list's own template parameters (GemmSpec) stay named: what the
registering calls bind them to is compared with the calls (ck_parts.registrations). The wheel's CK
writes 251 instances more than once: each occurrence counts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ckkb.kb.db import json_value
from ckkb.queries import rows, sql
from ckkb.queries.evidence import evidence_of
from ckkb.vocabulary import dtype as dtype_of

if TYPE_CHECKING:
    import sqlite_utils

Side = tuple["sqlite_utils.Database", list[str]]  # a tree's scoped database, archs it builds for


def instance_rows(
    conn: Any, from_name: str, to_name: str, arch: str, dir: str, dtype: str, layout: str = ""
) -> list[dict[str, Any]]:
    """The rows of the version_diff canned query (dtype: a C++ type; '' = any of each)."""
    params = {"from": from_name, "to": to_name, "arch": arch, "dir": dir, "dtype": dtype}
    params["layout"] = layout
    cur = conn.execute(sql("version_diff"), params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def instances(
    old: Side,
    new: Side,
    names: tuple[str, str],
    archs: Sequence[str],
    dir: str,
    dtype: str,
    layout: str,
) -> dict[str, list[dict[str, Any]]]:
    """{"added", "removed", "changed"} for the instances under `dir` with data type `dtype` (C++)
    and GEMM layout `layout` ('' = any of each); changed on the archs of `archs` both build for."""
    found = instance_rows(old[0].conn, names[0], names[1], "", dir, dtype, layout)
    added = [r for r in found if r["change"] == "added"]
    removed = [r for r in found if r["change"] == "removed"]
    changed: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in found:
        if r["change"] == "changed" and r["arch"] in archs:
            changed.setdefault((r["from_id"], r["to_id"]), []).append(r)
    from_rows = _details(old[0], [r["from_id"] for r in removed] + [k[0] for k in changed])
    to_rows = _details(new[0], [r["to_id"] for r in added] + [k[1] for k in changed])
    on_to = _availability(new, [r["to_id"] for r in added], archs)
    on_from = _availability(old, [r["from_id"] for r in removed], archs)
    out: dict[str, list[dict[str, Any]]] = {
        "added": [
            dict(_item(r, to_rows[r["to_id"]]), available=on_to.get(r["to_id"], {})) for r in added
        ],
        "removed": [
            dict(_item(r, from_rows[r["from_id"]]), available=on_from.get(r["from_id"], {}))
            for r in removed
        ],
        "changed": [],
    }
    evidence = _evidence(old, new, changed)
    for (fid, tid), per_arch in changed.items():
        item = _item(per_arch[0], to_rows[tid])
        item["archs"] = [
            {
                "arch": r["arch"],
                "from": evidence[0][(fid, r["arch"])],
                "to": evidence[1][(tid, r["arch"])],
            }
            for r in per_arch
        ]
        out["changed"].append(item)
    return out


def _details(db: sqlite_utils.Database, ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    return {
        r["id"]: r for r in rows(db.conn, "lookups", "diff_instances", {"ids": json.dumps(ids)})
    }


def _availability(side: Side, ids: list[int], archs: Sequence[str]) -> dict[int, dict[str, bool]]:
    """instance id -> {arch: available} on the archs of `archs` its tree builds for."""
    db, built = side
    out: dict[int, dict[str, bool]] = {i: {a: False for a in archs if a in built} for i in ids}
    if not ids:
        return out
    for r in rows(db.conn, "lookups", "diff_instance_availability", {"ids": json.dumps(ids)}):
        if r["arch"] in out[r["instance_id"]]:
            out[r["instance_id"]][r["arch"]] = bool(r["available"])
    return out


def _evidence(
    old: Side, new: Side, changed: dict[tuple[int, int], list[dict[str, Any]]]
) -> tuple[dict[tuple[int, str], Any], dict[tuple[int, str], Any]]:
    """((from id, arch) -> evidence, (to id, arch) -> evidence) for the changed instances only:
    each tree's chains in one set-wise read (ckkb.queries.evidence.evidence_of)."""
    wanted: tuple[dict[str, list[int]], dict[str, list[int]]] = ({}, {})
    for (fid, tid), per_arch in changed.items():
        for r in per_arch:
            wanted[0].setdefault(r["arch"], []).append(fid)
            wanted[1].setdefault(r["arch"], []).append(tid)
    return evidence_of(old[0].conn, wanted[0]), evidence_of(new[0].conn, wanted[1])


def _item(r: dict[str, Any], detail: dict[str, Any]) -> dict[str, Any]:
    tile = (detail["tile_m"], detail["tile_n"], detail["tile_k"])
    return {
        "template": r["template"],
        "dir": r["dir"],
        "dtype": dtype_word(detail["a_dtype"], detail["b_dtype"], detail["c_dtype"]),
        "layout": r["layout"],
        "tile": "x".join(map(str, tile)) if all(t is not None for t in tile) else None,
        "list": {"from": r["from_list"], "to": r["to_list"]},
        "status": {"from": r["from_status"], "to": r["to_status"]},
        "fields": json_value(detail["fields"]) or {},
        "args": json_value(r["resolved"]) or [],
        "from": f"{r['from_file']}:{r['from_line']}" if r["from_file"] else None,
        "to": f"{r['to_file']}:{r['to_line']}" if r["to_file"] else None,
    }


def dtype_word(a: str | None, b: str | None, c: str | None) -> str | None:
    """bf16 when A, B and C are all bhalf_t; else each one's word, e.g. f8_f8_bf16."""
    words = [_word(t) for t in (a, b, c)]
    if all(w is None for w in words):
        return None
    if len(set(words)) == 1:
        return words[0]
    return "_".join(w or "?" for w in words)


def _word(t: str | None) -> str | None:
    d = dtype_of(t)
    return d.name if d else t
