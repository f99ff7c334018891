"""The race chart: one race's instances as bars, the winner highlighted, repeats beside it.

- Bars are the race's timed results (TFLOPS, or ms for races whose lines carry no TFLOPS, fastest
  first). When the race's winner (races_summary: the instance its Best line names) has no bar of
  its own at the best value, as when a log prints its Best line but not that Perf: line, a bar for
  the Best line is added. The highlighted bar is the one whose name and value are the winner's.
- Labels show what differs between the bars (the name's tokens that are not the same in all of
  them); the full name is in the tooltip and in `data-name`.
- A peak (and the GEMM's roofline bound) is drawn when the race names a device the peaks table
  knows (ckkb.harness.roofline).
- Repeat races (same op, dtype, layout, M, N, K, arch) are listed with their best values and
  spread; every race has a chart, and the chart links back to its race_spread row.
"""

from __future__ import annotations

import os
import re
import sqlite3
from typing import Any
from urllib.parse import urlencode

import markupsafe
from datasette.utils.asgi import Request, Response

from ckkb import queries
from ckkb.harness import roofline
from ckkb.queries import explain
from ckkb.web import charts, pages, tree_scope

_PROP = re.compile(r"(\w+)\s*:\s*([^,\s]+)")


def _parts(name: str) -> tuple[str, list[str], list[tuple[str, str]]]:
    """(device op, its template arguments or name fields, its `Key: value` properties)."""
    body, _, rest = name.partition(">") if "<" in name else ("", "", name)
    if body:
        head, _, args = body.partition("<")
        fields = [a.strip() for a in args.split(",")]
    else:
        first, _, rest = rest.partition(" ")
        head, *fields = first.split("_")
    return head.strip(), fields, _PROP.findall(rest)


def diff_labels(names: list[str]) -> list[str]:
    """Per name, what differs from the other names: the device op (when there are several),
    its template arguments (all of them, compact, when only numbers differ; else the differing
    ones) and the `Key: value` properties that differ between names of the same device op (the
    value; a number keeps its key)."""
    parts = [_parts(n) for n in names]
    heads = {p[0] for p in parts}
    out = []
    for head, fields, props in parts:
        peers = [q for q in parts if q[0] == head and len(q[1]) == len(fields)]
        differ = [k for k in range(len(fields)) if len({q[1][k] for q in peers}) > 1]
        bits = [head] if len(heads) > 1 or not (differ or props) else []
        if differ and all(fields[k].isdigit() for k in differ):
            bits.append("<" + ",".join(fields) + ">")
        else:
            bits += [fields[k] for k in differ]
        values = {k: {dict(q[2]).get(k) for q in parts if q[0] == head} for k, _ in props}
        for k, v in props:
            if len(values[k]) > 1:
                bits.append(f"{k} {v}" if v.isdigit() else v)
        out.append(" ".join(bits) or head)
    return out


def race_label(s: dict[str, Any]) -> str:
    shape = "x".join(str(s.get(k)) for k in ("M", "N", "K") if s.get(k) is not None)
    bits = [s.get("op"), s.get("dtype"), s.get("layout"), shape, s.get("arch")]
    return " ".join(str(b) for b in bits if b)


# Kept for the server's life on purpose: race_links parses every result's name (a second on a big
# knowledge base), and the key includes the file's size and mtime, so a rebuilt or newly ingested
# file gets its own entry (the old one is dropped).
# Keyed by the file and the trees the connection reads (ckkb.web.tree_scope).
_LINKS: dict[tuple[str, str], tuple[tuple[int, int], dict[int, list[int]]]] = {}


def links(conn: sqlite3.Connection) -> dict[int, list[int]]:
    """explain.race_links, computed once per version of the database file."""
    path = conn.execute("pragma database_list").fetchone()[2]
    try:
        st = os.stat(path)
        version = (st.st_size, st.st_mtime_ns)
    except OSError:
        version = (0, 0)
    key = (path, str(queries.rows(conn, "browse", "scope_key")[0]["trees"]))
    cached = _LINKS.get(key)
    if cached is None or cached[0] != version:
        _LINKS[key] = (version, explain.race_links(conn))
    return _LINKS[key][1]


def race_data(conn: sqlite3.Connection, race: str | None) -> dict[str, Any]:
    """Every race's summary (the race_spread canned query) and, for one race, its bars, its
    Best line and the links of its results to instances."""
    cur = conn.execute(queries.sql("race_spread"), {"race_id": ""})
    cols = [d[0] for d in cur.description]
    summaries = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    out: dict[str, Any] = {"summaries": summaries, "bars": [], "best": None, "links": {}}
    if race:
        out["bars"] = queries.rows(conn, "browse", "race_bars", {"race": race})
        best = queries.rows(conn, "browse", "race_best", {"race": race})
        out["best"] = best[0] if best else None
        out["links"] = links(conn)
    return out


def _bars(datasette: Any, data: dict[str, Any], summary: dict[str, Any]) -> list[charts.Bar]:
    tflops = summary.get("unit") == "TFLOPS"
    pts = [
        (r["name"] or "(no name)", r["tflops"] if tflops else r["ms"], r["id"])
        for r in data["bars"]
        if (r["tflops"] if tflops else r["ms"]) is not None
    ]
    pts.sort(key=lambda p: -p[1] if tflops else p[1])
    winner, best = summary.get("winner"), summary.get("best")
    win = next((k for k, p in enumerate(pts) if p[0] == winner and p[1] == best), None)
    b = data["best"] or {}
    if win is None and winner and best is not None:
        pts.append((winner, best, None))  # the Best line's instance, not among the Perf: lines
        pts.sort(key=lambda p: -p[1] if tflops else p[1])
        win = next(k for k, p in enumerate(pts) if p[2] is None and p[0] == winner)
    if not pts and best is not None:  # a log with only an unnamed Best line
        pts.append(("(Best line: no instance name)", best, None))
    labels = diff_labels([p[0] for p in pts])
    out = []
    for k, ((name, value, rid), lab) in enumerate(zip(pts, labels, strict=True)):
        iids = data["links"].get(rid) if rid is not None else None
        tag = " (Best line)" if rid is None and b.get("best_name") == name else ""
        out.append(
            charts.Bar(
                label=f"{k + 1}. {lab}{tag}",
                value=float(value),
                title=name,
                href=pages.instance_href(datasette, iids[0]) if iids else None,
                highlight=(k == win),
            )
        )
    return out


# ckProfiler's data-type words -> the roofline table's
_PEAK_DTYPES = {"f16": "fp16", "fp16": "fp16", "bf16": "bf16", "f8": "fp8", "fp8": "fp8"}


def _lines(summary: dict[str, Any], best: dict[str, Any] | None) -> tuple[list[charts.Line], str]:
    """The device's peak and the GEMM's roofline bound, or why there are none."""
    if summary.get("unit") != "TFLOPS":
        return [], "no peak line: this race's lines carry times only"
    part = roofline.match_part(summary.get("gpu") or "", summary.get("arch"))
    if part is None:
        return [], (
            "no peak line: the race's device is not known "
            "(`ckkb ingest --arch gfx942 --gpu MI300X LOG` records it)"
        )
    dtype = _PEAK_DTYPES.get((summary.get("dtype") or "").lower(), "")
    if dtype not in roofline.DTYPE_BYTES:
        return [], f"no peak line: no peak for data type {summary.get('dtype')!r} on {part.part}"
    peak = part.tflops(dtype)
    lines = [charts.Line(peak, f"{part.part} peak")]
    m, n, k = (summary.get(x) for x in ("M", "N", "K"))
    if m and n and k:
        flops = roofline.gemm_flops(m, n, k)
        seconds = roofline.gemm_min_bytes(m, n, k, dtype) / (part.hbm_gbps * 1e9)
        bound = min(peak, flops / seconds / 1e12)
        if bound < peak:
            lines.append(charts.Line(bound, "roofline"))
    return lines, ""


async def race_chart_view(datasette: Any, request: Request) -> Response:
    db = pages.kb_database(datasette, request)
    if db is None:
        return await pages.no_kb(datasette, request)
    race = (request.args.get("race") or "").strip()
    if race and not race.isdigit():
        return await pages.error(
            datasette,
            request,
            "Bad race id",
            [f"race '{race}' is not a race id: expected an integer (see the races table)"],
        )
    data = await tree_scope.execute(
        db, tree_scope.arg(request), lambda conn: race_data(conn, race or None)
    )
    summaries = data["summaries"]
    summary = next((s for s in summaries if str(s.get("id")) == race), None)
    if race and summary is None:
        return await pages.error(
            datasette,
            request,
            "No such race",
            [f"race {race} is not in {db.name}"],
            status=404,
            links=[(datasette.urls.path(f"{pages.PREFIX}/chart/race-spread"), "pick another race")],
        )
    svg, no_line = "", ""
    bars: list[charts.Bar] = []
    lines: list[charts.Line] = []
    if summary is not None:
        bars = _bars(datasette, data, summary)
        lines, no_line = _lines(summary, data["best"])
        unit = summary.get("unit") or ""
        svg = charts.hbar_svg(
            bars,
            unit=unit,
            width=1100,
            label_width=520,
            caption=f"race {race}: {unit} per instance",
            lines=lines,
        )

    def shape(s: dict[str, Any]) -> tuple[Any, ...]:

        return (
            s["op"],
            s["dtype"],
            s["layout"],
            s["M"],
            s["N"],
            s["K"],
            s["arch"],
            s["unit"],
        )

    repeats = (
        [s for s in summaries if shape(s) == shape(summary) and s["M"] is not None]
        if summary
        else []
    )
    query_url = datasette.urls.path(f"/{db.name}/race_spread")
    return await pages.page(
        datasette,
        request,
        "ckkb_chart.html",
        {
            "title": "Race spread" + (f" — race {race}: {race_label(summary)}" if summary else ""),
            "kind": "race",
            "svg": markupsafe.Markup(svg),
            "race": race,
            "races": [
                {"id": s["id"], "label": race_label(s), "n": s.get("timed")} for s in summaries
            ],
            "stats": summary,
            "bars": len(bars),
            "linked": sum(1 for b in bars if b.href),
            "no_line": no_line,
            "repeats": repeats if len(repeats) > 1 else [],
            "race_spread_url": query_url + "?" + urlencode({"race_id": race}),
            "all_races_url": query_url + "?" + urlencode({"race_id": ""}),
        },
    )
