"""ckProfiler legends and races as the CLI, the runner and ingestion read them (SQL in lookups/)."""

from __future__ import annotations

import json
from typing import Any, Literal, overload

from ckkb.errors import CkkbError
from ckkb.kb import db as kbdb
from ckkb.profiler_legend import Legend, json_value
from ckkb.queries import lookup, sql

RACE_KEYS = (
    "id",
    "op",
    "dtype",
    "layout",
    "M",
    "N",
    "K",
    "arch",
    "timed",
    "registered",
    "best",
    "worst",
    "spread",
    "winner",
)


@overload
def load_legend(db: Any, op: str, *, required: Literal[True] = True) -> Legend: ...
@overload
def load_legend(db: Any, op: str, *, required: bool) -> Legend | None: ...
def load_legend(db: Any, op: str, *, required: bool = True) -> Legend | None:
    """An op's legend; an unknown op is an error naming the close ones (None if not required)."""
    if "profiler_ops" not in db.table_names():
        if required:
            raise CkkbError(
                "this knowledge base has no ckProfiler legends", hint="rebuild it with `ckkb build`"
            )
        return None
    ops = list(db.query(lookup("profiler_op"), {"op": op}))
    if not ops:
        if not required:
            return None
        close = [r["name"] for r in db.query(lookup("profiler_ops_like"), {"fragment": op})]
        raise CkkbError(
            f"unknown ckProfiler op: {op}",
            hint=("did you mean: " + ", ".join(close))
            if close
            else "list them with `ckkb profiler ops`",
        )
    row = ops[0]
    args = []
    for a in db.query(lookup("profiler_positional_args"), {"op": op}):
        a = dict(a)
        a["codes"] = json_value(a["codes"]) or {}
        a["enum"] = json_value(a["enum"]) or {}
        args.append(a)
    quirks = []
    for q in db.query(lookup("profiler_quirks"), {"op": op}):
        q = dict(q)
        q["details"] = json_value(q["details"]) or {}
        quirks.append(q)
    argc = list(json_value(row["argc_allowed"]) or [])
    return Legend(op, args, argc, quirks, row["description"], row["file"])


def raced_before(
    db: Any, op: str, M: int, N: int, K: int, dtype: str | None, layout: str | None
) -> bool:
    """Whether any race timed this op and shape (a first race of a shape should verify)."""
    if db is None or "races" not in db.table_names():
        return False
    params = {"op": op, "M": M, "N": N, "K": K, "dtype": dtype, "layout": layout}
    rows = list(db.query(lookup("races_of_shape"), params))
    return bool(rows and rows[0]["n"])


def list_ops(db: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": r["name"],
            "description": r["description"],
            "file": r["file"],
            "line": r["line"],
            "gemm_family": bool(r["gemm_family"]),
            "legend": r["legend_kind"],
            "positional_args": r["positional_args"],
            "interfaces": json.loads(r["interfaces"] or "[]"),
        }
        for r in db.query(lookup("profiler_ops"))
    ]


def legend_json(db: Any, op: str) -> dict[str, Any]:
    lg = load_legend(db, op)
    assert lg is not None  # required=True raises instead
    row = list(db.query(lookup("profiler_op"), {"op": op}))[0]
    args = [
        {
            "position": a["position"],
            "name": a["name"],
            "codes": json.loads(a["codes"] or "{}"),
            "enum": json.loads(a["enum"] or "{}"),
            "optional": bool(a["optional"]),
            "default": a["default"],
            "kind": a["kind"],
            "text": a["text"],
        }
        for a in db.query(lookup("profiler_all_args"), {"op": op})
    ]
    return {
        "op": op,
        "description": row["description"],
        "file": row["file"],
        "line": row["line"],
        "usage": row["usage"],
        "argc_allowed": lg.argc_allowed,
        "interfaces": json.loads(row["interfaces"] or "[]"),
        "args": args,
        "quirks": [
            {
                "kind": q["kind"],
                "summary": q["summary"],
                "condition": q["condition"],
                "file": q["file"],
                "line": q["line"],
            }
            for q in lg.quirks
        ],
    }


def races_json(db: Any, race_id: int | None = None) -> dict[str, Any]:
    """Every race (or one) with its spread and winner, from the `race_spread` canned query."""
    have = set(db.view_names())
    for name, ddl in kbdb.view_sql():
        if name.startswith("races_") and name not in have:
            # a knowledge base built before these views existed, opened read-only: temporary views
            db.execute(ddl.replace(f"CREATE VIEW {name}", f"CREATE TEMP VIEW {name}", 1))
    cur = db.execute(sql("race_spread"), {"race_id": race_id})
    cols = [d[0] for d in cur.description]
    races = []
    for r in cur.fetchall():
        d = dict(zip(cols, r, strict=True))
        races.append({k: d[k] for k in RACE_KEYS})
    return {"races": races}
