"""The chart of the `fleet_spread` canned query: outlier rows per GPU, on the query's own page.

A Datasette plugin module of its own (registered beside ckkb.web.plugin), so it stays apart from
the other pages:

- `/-/ckkb/chart/fleet-spread.svg?arch=&slack=` runs the canned query's own SQL and draws one
  bar per host and GPU: how many of its rows are outliers (slower than the group median by more
  than `slack`); the GPU with the most is highlighted, the tooltip gives its median ratio.
- on the `fleet_spread` page, a small script fetches that SVG with the page's own query string
  and puts it above the rows (inline, so the bars' tooltips work).
"""

from __future__ import annotations

import sqlite3
import statistics
from typing import Any
from urllib.parse import urlencode

from datasette import hookimpl
from datasette.utils.asgi import Request, Response

from ckkb import queries
from ckkb.web import charts
from ckkb.web.pages import kb_database

QUERY = "fleet_spread"
ROUTE = "/-/ckkb/chart/fleet-spread.svg"


def per_gpu(conn: sqlite3.Connection, arch: str, slack: str) -> list[charts.Bar]:
    """One bar per (host, GPU): its outlier rows; title: rows, outliers, median ratio."""
    try:
        cur = conn.execute(queries.sql(QUERY), {"arch": arch, "slack": slack})
    except sqlite3.OperationalError:  # not a knowledge base with races and harness tables
        return []
    cols = [d[0] for d in cur.description]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in cur.fetchall():
        row = dict(zip(cols, r, strict=True))
        groups.setdefault((str(row["host"]), str(row["gpu"])), []).append(row)
    bars = []
    for (host, gpu), rows in groups.items():
        out = sum(1 for r in rows if r["outlier"])
        ratio = statistics.median(r["ratio"] for r in rows)
        idx = rows[0].get("gpu_index")
        label = f"{host} GPU {idx if idx is not None else '?'} ({gpu[:13]})"
        title = f"{host} {gpu}: {out} of {len(rows)} rows outliers, median ratio {ratio:.3f}"
        bars.append(charts.Bar(label=label, value=float(out), title=title))
    bars.sort(key=lambda b: (-b.value, b.label))
    if bars and bars[0].value > 0:
        b = bars[0]
        bars[0] = charts.Bar(b.label, b.value, b.title, highlight=True)
    return bars


async def chart_view(datasette: Any, request: Request) -> Response:
    db = kb_database(datasette, request)
    if db is None:
        return Response.text("no ckkb knowledge base is being served\n", status=404)
    arch = (request.args.get("arch") or "").strip()
    slack = (request.args.get("slack") or "").strip()
    bars = await db.execute_fn(lambda conn: per_gpu(conn, arch, slack))
    caption = "fleet_spread: outlier rows per GPU" + (f" ({arch})" if arch else "")
    svg = charts.hbar_svg(bars, unit="outlier rows", label_width=360, caption=caption)
    if not bars:
        svg = (
            '<svg xmlns="http://www.w3.org/2000/svg" width="600" height="24" role="img" '
            f'aria-label="{caption}"><text x="4" y="16" font-size="12">no shape was timed '
            "on two or more GPUs of one arch</text></svg>"
        )
    return Response(svg, content_type="image/svg+xml; charset=utf-8")


SCRIPT = """
(function () {
  var path = location.pathname.replace(/\\/+$/, "");
  if (!/\\/fleet_spread$/.test(path) || document.getElementById("ckkb-fleet-chart")) return;
  var box = document.createElement("div");
  box.id = "ckkb-fleet-chart";
  box.className = "ckkb-chart-box";
  var anchor = document.querySelector(".table-wrapper") || document.querySelector("h1");
  if (!anchor) return;
  anchor.parentNode.insertBefore(box, anchor);
  fetch(%(url)s + location.search).then(function (r) { return r.text(); })
    .then(function (t) { box.innerHTML = t; });
})();
"""


@hookimpl
def register_routes(datasette: Any) -> list[tuple[str, Any]]:
    return [(r"^/-/ckkb/chart/fleet-spread\.svg$", chart_view)]


@hookimpl
def extra_body_script(
    template: str,
    database: str | None,
    table: str | None,
    columns: list[str] | None,
    view_name: str,
    request: Request | None,
    datasette: Any,
) -> str | None:
    if request is None or not request.path.rstrip("/").endswith(f"/{QUERY}"):
        return None
    url = datasette.urls.path(ROUTE)
    return SCRIPT % {"url": repr(url)}


def chart_href(datasette: Any, arch: str = "") -> str:

    return datasette.urls.path(ROUTE) + ("?" + urlencode({"arch": arch}) if arch else "")
