"""The gate census chart: device-name gates per directory under gpu/, stacked by effect."""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import urlencode

import markupsafe
from datasette.utils.asgi import Request, Response

from ckkb import queries
from ckkb.web import charts, pages, tree_scope, validate
from ckkb.web.landing import loaded_choices


def gate_census_rows(conn: sqlite3.Connection, arch: str) -> list[dict[str, Any]]:
    """Rows of the gate_census canned query (the same SQL the CLI runs) for device-name gates."""
    cur = conn.execute(queries.sql("gate_census"), {"kind": "device_name", "arch": arch})
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def census(rows: list[dict[str, Any]]) -> tuple[list[tuple[str, dict[str, float]]], list[str]]:
    """(directories with their gate counts per effect, most gates first; the effects)."""
    per_dir: dict[str, dict[str, float]] = {}
    for r in rows:
        effect = r.get("effect") or r.get("kind") or "?"
        cell = per_dir.setdefault(r["dir"], {})
        cell[effect] = cell.get(effect, 0) + (r.get("gates") or 0)
    series = sorted({e for v in per_dir.values() for e in v}, key=lambda e: (e != "exclude", e))
    ordered = sorted(per_dir.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    return ordered, series


def census_svg(datasette: Any, db_name: str, rows: list[dict[str, Any]], arch: str) -> str:
    ordered, series = census(rows)
    hrefs = {
        d: datasette.urls.table(db_name, "gates")
        + "?"
        + urlencode({"dir": d, "kind": "device_name", **({"arch": arch} if arch else {})})
        for d, _ in ordered
    }
    return charts.stacked_svg(
        ordered, series, caption="device-name gates per directory", hrefs=hrefs
    )


async def gate_chart_view(datasette: Any, request: Request) -> Response:
    db = pages.kb_database(datasette, request)
    if db is None:
        return await pages.no_kb(datasette, request)
    archs = [v for v, _label in (await loaded_choices(db)).get("arch", [])]
    checked = validate.check(
        ["arch"], [], {"arch": request.args.get("arch", "")}, archs=archs or None
    )
    if not checked.ok:
        return await pages.error(datasette, request, "Bad parameter", checked.errors)
    arch = checked.normalised.get("arch", request.args.get("arch", "").strip())
    rows = await tree_scope.execute(
        db, tree_scope.arg(request), lambda conn: gate_census_rows(conn, arch)
    )
    ordered, series = census(rows)
    return await pages.page(
        datasette,
        request,
        "ckkb_chart.html",
        {
            "title": "Gate census" + (f" — {arch}" if arch else ""),
            "kind": "gates",
            "svg": markupsafe.Markup(census_svg(datasette, db.name, rows, arch)),
            "arch": arch,
            "archs": archs,
            "totals": {s: sum(v.get(s, 0) for _, v in ordered) for s in series},
            "dirs": len(ordered),
            "query_url": datasette.urls.path(f"/{db.name}/gate_census")
            + "?"
            + urlencode({"kind": "device_name", "arch": arch}),
        },
    )
