"""The landing page at `/` (the four questions as forms, what the knowledge base holds) and the
one search box (instances, printed names and tiles together, saying where it looked)."""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import Any

from datasette.utils import escape_fts
from datasette.utils.asgi import Request, Response

from ckkb import queries
from ckkb.web import choices, pages, tree_scope, validate

SHOWN = 50


def landing_data(conn: sqlite3.Connection) -> dict[str, Any]:
    info = {r["key"]: r["value"] for r in queries.rows(conn, "browse", "build_info")}
    return {
        "info": info,
        "counts": queries.rows(conn, "browse", "counts")[0],
    }


async def loaded_choices(db: Any) -> dict[str, list[tuple[str, str]]]:
    """choices.load, once per served file (ckkb.web.live drops it when a build replaces it)."""
    cache = getattr(db, "_ckkb_choices", None)
    if cache is None:
        cache = db._ckkb_choices = await db.execute_fn(choices.load)
    return cache


async def landing_view(datasette: Any, request: Request) -> Response:
    db = pages.kb_database(datasette, request)
    if db is None:
        return await pages.no_kb(datasette, request)
    tree = tree_scope.arg(request)
    data = await tree_scope.execute(db, tree, landing_data)
    known = await tree_scope.trees(db)
    return await pages.page(
        datasette,
        request,
        "ckkb_landing.html",
        {
            "db_name": db.name,
            "choices": await loaded_choices(db),
            "queries": list(pages.canned(datasette).values()),
            "tables": await db.table_names(),
            "tree": tree,
            "trees": known.all if known.several else (),
            "reading": known.chosen(tree),
            "sources": [dataclasses.asdict(t) for t in known.all],  # every tree, read or not
            **data,
        },
    )


def search_data(conn: sqlite3.Connection, q: str) -> list[dict[str, Any]]:
    """Where the search looked, in order, each with its rows (at most SHOWN + 1)."""
    out: list[dict[str, Any]] = []
    q = q.strip()
    if q.isdigit():
        out.append(
            {
                "where": "instance ids",
                "rows": queries.rows(conn, "browse", "search_id", {"id": int(q)}),
            }
        )
    dims = validate.parse_tile(q)
    if dims is not None:
        m, n, k = dims
        out.append(
            {
                "where": f"tiles (MPerBlock x NPerBlock x KPerBlock = {m}x{n}x{k})",
                "rows": queries.rows(conn, "browse", "search_tile", {"m": m, "n": n, "k": k}),
                "tile": f"{m}x{n}x{k}",
            }
        )
    fts = escape_fts(q)
    out.append(
        {
            "where": "printed instance names (what ckProfiler prints: instance_keys)",
            "rows": queries.rows(conn, "browse", "search_names", {"q": fts}),
            "table": "instance_keys",
        }
    )
    out.append(
        {
            "where": "instances (template, list name, file path)",
            "rows": queries.rows(conn, "browse", "search_instances", {"q": fts}),
            "table": "instances",
        }
    )
    return out


async def search_view(datasette: Any, request: Request) -> Response:
    db = pages.kb_database(datasette, request)
    if db is None:
        return await pages.no_kb(datasette, request)
    q = (request.args.get("q") or "").strip()
    tree = tree_scope.arg(request)
    sections = await tree_scope.execute(db, tree, lambda conn: search_data(conn, q)) if q else []
    for s in sections:
        s["more"] = len(s["rows"]) > SHOWN
        s["rows"] = s["rows"][:SHOWN]
        for r in s["rows"]:
            if r.get("tile_m") is not None:
                r["tile"] = f"{r['tile_m']}x{r['tile_n']}x{r['tile_k']}"
            r["href"] = pages.instance_href(datasette, r["id"])
    return await pages.page(
        datasette,
        request,
        "ckkb_search.html",
        {
            "title": f"Search: {q}" if q else "Search",
            "q": q,
            "db_name": db.name,
            "sections": sections,
            "found": sum(len(s["rows"]) for s in sections),
            "shown": SHOWN,
            "archs": (await loaded_choices(db)).get("arch", []),
            "tree": tree,
            "trees": (await loaded_choices(db)).get("tree", []),
        },
    )
