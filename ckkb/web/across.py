"""The explain page's availability across trees: one instance, every CK tree that has it.

The same instance in another tree is found by identity (device op + resolved template
arguments, ckkb.queries.explain.identity_availability), never by id, file or line. The table is
arch x tree: yes/no, and for a no the first layer that removes it, each tree's heading linking to
that tree's explain page of the instance.
"""

from __future__ import annotations

from typing import Any

from ckkb.extract.archs_stage import arch_order
from ckkb.queries import explain
from ckkb.web import pages, tree_scope


async def across_trees(
    datasette: Any, db: Any, inst: dict[str, Any], tree: str
) -> dict[str, Any] | None:
    """{"trees": [...], "rows": [...], "missing": [names]} when the knowledge base holds more
    than one CK tree; None otherwise."""
    known = await tree_scope.trees(db)
    cks = known.of_kind("ck")
    if len(cks) < 2:
        return None
    found = await tree_scope.execute_each(
        db, [t.name for t in cks], lambda _name, conn: explain.identity_availability(conn, inst)
    )
    current = known.chosen(tree).get("ck")
    have = [(t, f) for t in cks if (f := found[t.name]) is not None]
    # in the order the trees list their archs (length, then name), as the per-arch table
    archs = sorted({a for _, f in have for a in f["archs"]}, key=arch_order)
    heads = [
        {
            "name": t.name,
            "version": t.version,
            "current": current is not None and t.id == current.id,
            "href": pages.instance_href(
                datasette, f["id"], "" if known.is_default(t.name) else t.name
            ),
            "id": f["id"],
            "status": f["status"],
        }
        for t, f in have
    ]
    rows = []
    for arch in archs:
        cells = []
        for _, f in have:
            a = f["archs"].get(arch)
            if f["status"] != "active":
                cells.append({"available": False, "layer": f["status"].replace("_", " ")})
            elif a is None:
                gap = "not an arch of this tree" if f["archs"] else "no registration adds it"
                cells.append({"available": None, "layer": gap})
            else:
                where = f"{a['file']}:{a['line']}" if a.get("file") else ""
                cells.append(
                    {
                        "available": a["available"],
                        "layer": a.get("layer") or "",
                        "title": " ".join(x for x in (where, a.get("condition") or "") if x),
                    }
                )
        rows.append({"arch": arch, "cells": cells})
    return {
        "trees": heads,
        "rows": rows,
        "missing": [t.name for t in cks if found[t.name] is None],
    }
