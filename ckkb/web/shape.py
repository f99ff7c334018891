"""Canned-query pages shaped for their question: the answer first, a summary line, grouped rows.

Datasette runs the canned query (the same SQL file the CLI runs, so its JSON and CSV are the
query's rows as they are) and renders every cell through render_cell (ckkb.web.cells). The page
template (templates/ckkb_query.html, served for every canned query) then calls `shape()`, which,
from the query's `Spec` (ckkb.web.specs):

- puts the answer column and its evidence first, then the other columns (a few are hidden: the
  JSON and CSV still have them), and adds derived columns (`tile` as 256x224x64);
- folds the rows of one instance into one row where the question is per instance (why_missing:
  one row per registering call in the SQL, one row per instance on the page, the calls in a cell);
- writes the one-line summary above the table;
- says, when nothing matched, why, and which values are nearest (from `page_extras`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

import markupsafe

Row = dict[str, Any]


@dataclass(frozen=True)
class Spec:
    """How one canned query's page is laid out (see ckkb.web.specs)."""

    lead: tuple[str, ...] = ()  # first columns, in order: the answer and its evidence
    answer: str = ""  # the column that answers the question ("@param": the column it names)
    answer_at: int = 0  # where the answer goes among the lead columns
    decisive: tuple[str, ...] = ()  # full text, wrapped at word and path boundaries
    hide: tuple[str, ...] = ()  # left out of the page (still in JSON and CSV)
    group_by: str | None = None  # one page row per value of this column
    # the folded cell of a group: (its rows, their rendered cells, the column names)
    fold: Callable[[list[Row], list[list[Any]], list[str]], markupsafe.Markup] | None = None
    fold_name: str = "registrations"
    pick: Callable[[list[Row]], int] | None = None  # which row of a group speaks for it
    derived: Mapping[str, Callable[[Row], Any]] = field(default_factory=dict)
    summary: Callable[[list[Row], dict[str, str]], str] | None = None
    empty: str = ""  # why a result can be empty, and what to do
    order: Callable[[Row], Any] | None = None  # page order (the SQL's order otherwise)
    row_class: Callable[[Row, list[str]], str] | None = None
    columns: Callable[[list[str], list[Row], dict[str, str]], list[str]] | None = None
    chart: Callable[[Any, str, list[Row], dict[str, str]], tuple[str, str, str]] | None = None
    # a JSON-object column whose keys become columns in its place (pool's per-arch counts: the
    # tree's archs, not a fixed list); "@expand" in `lead` stands for those columns
    expand: str = ""
    expand_cell: Callable[[Any], Any] | None = None  # how one expanded value reads


@dataclass
class Column:
    name: str
    answer: bool = False
    decisive: bool = False

    @property
    def css(self) -> str:
        return self.name.replace(" ", "_")


@dataclass
class Shaped:
    columns: list[Column]
    rows: list[tuple[str, list[Any]]]  # (row class, cells)
    summary: markupsafe.Markup
    empty: markupsafe.Markup
    answer: str
    chart_svg: markupsafe.Markup = markupsafe.Markup("")
    chart_href: str = ""
    chart_label: str = ""


def tile_of(r: Row) -> str | None:
    dims = [r.get("tile_m"), r.get("tile_n"), r.get("tile_k")]
    return "x".join(str(d) for d in dims) if all(d is not None for d in dims) else None


def _cell(value: Any) -> Any:
    return markupsafe.Markup("&nbsp;") if value in (None, "") else value


def shape(
    spec: Spec,
    columns: Sequence[str],
    rows: Sequence[Any],
    display_rows: Sequence[Sequence[Any]],
    args: dict[str, str],
    extras: dict[str, Any] | None = None,
    datasette: Any = None,
    database: str = "",
) -> Shaped:
    """The page's columns, rows, summary and empty-result text for one canned query's rows."""
    cols = list(columns)
    dicts = [dict(zip(cols, tuple(r), strict=True)) for r in rows]
    display = [list(d) for d in display_rows]
    for name, fn in spec.derived.items():  # derived columns, e.g. tile from tile_m/n/k
        if name not in cols:
            cols.append(name)
            for d, cells in zip(dicts, display, strict=True):
                d[name] = fn(d)
                cells.append(_cell(d[name]))
    keys: list[str] = []
    if spec.expand and spec.expand in cols:
        cols, keys = _expand(spec, cols, dicts, display)
    answer = spec.answer
    if answer.startswith("@"):
        answer = args.get(answer[1:], "") or ""
    pairs = list(zip(dicts, display, strict=True))
    if spec.group_by and spec.group_by in cols:
        pairs = _grouped(spec, cols, pairs)
        if spec.fold is not None:
            cols.append(spec.fold_name)
    if spec.order is not None:
        pairs.sort(key=lambda p: spec.order(p[0]))  # type: ignore[misc]
    shown = spec.columns(cols, dicts, args) if spec.columns else cols
    lead_names = [k for c in spec.lead for k in (keys if c == "@expand" else [c])]
    lead = [c for c in lead_names if c in shown and c != answer]
    if answer in shown:
        lead.insert(spec.answer_at, answer)
    order = list(dict.fromkeys(lead + [c for c in shown if c not in spec.hide]))
    if answer not in order:  # a query without a spec: its first column answers it
        answer = order[0] if order else ""
    index = {c: k for k, c in enumerate(cols)}
    page_rows = []
    for d, cells in pairs:
        cls = spec.row_class(d, order) if spec.row_class else ""
        page_rows.append((cls, [cells[index[c]] for c in order]))
    summary = spec.summary(dicts, args) if spec.summary and dicts else f"{len(dicts)} rows."
    out = Shaped(
        columns=[
            Column(c, answer=(c == answer), decisive=(c in spec.decisive or c == answer))
            for c in order
        ],
        rows=page_rows,
        summary=markupsafe.Markup(summary),
        empty=markupsafe.Markup(_empty(spec, args, extras or {})),
        answer=answer,
    )
    if spec.chart is not None and datasette is not None and dicts:
        svg, href, label = spec.chart(datasette, database, dicts, args)
        out.chart_svg, out.chart_href, out.chart_label = markupsafe.Markup(svg), href, label
    return out


def _grouped(
    spec: Spec, cols: list[str], pairs: list[tuple[Row, list[Any]]]
) -> list[tuple[Row, list[Any]]]:
    """One (row, cells) per value of spec.group_by, in first-seen order: the row that speaks for
    the group (spec.pick), with the folded cell appended."""
    groups: dict[Any, list[tuple[Row, list[Any]]]] = {}
    for p in pairs:
        groups.setdefault(p[0][spec.group_by or ""], []).append(p)
    out = []
    for members in groups.values():
        rows = [m[0] for m in members]
        k = spec.pick(rows) if spec.pick else 0
        d, cells = dict(members[k][0]), list(members[k][1])
        d["_group"] = rows
        if spec.fold is not None:
            cells.append(spec.fold(rows, [m[1] for m in members], cols))
        out.append((d, cells))
    return out


def _empty(spec: Spec, args: dict[str, str], extras: dict[str, Any]) -> str:
    """Why nothing matched: the parameters whose values the knowledge base does not have, with
    the nearest values it does have, then the query's own reason."""
    bits = []
    for p, (value, near) in (extras.get("unknown") or {}).items():
        hint = f"; nearest: {', '.join(_link_value(p, n, args) for n in near)}" if near else ""
        bits.append(f"No {escape(p)} <code>{escape(value)}</code> in this knowledge base{hint}.")
    if spec.empty:
        bits.append(spec.empty)
    return "No rows. " + " ".join(bits) if bits else "No rows."


def _link_value(param: str, value: str, args: dict[str, str]) -> str:
    from urllib.parse import urlencode

    q = urlencode({**args, param: value})
    return f'<a class="ckkb-nearest" href="?{escape(q)}">{escape(value)}</a>'


def yes_no(flag: bool, title: str = "") -> markupsafe.Markup:
    t = f' title="{escape(title)}"' if title else ""
    if flag:
        return markupsafe.Markup(f'<span class="ckkb-yes"{t}>yes</span>')
    return markupsafe.Markup(f'<span class="ckkb-no"{t}>no</span>')


def counts(rows: list[Row], key: str) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for r in rows:
        out[r.get(key)] = out.get(r.get(key), 0) + 1
    return out


def _expand(
    spec: Spec, cols: list[str], dicts: list[Row], display: list[list[Any]]
) -> tuple[list[str], list[str]]:
    """Replace the JSON-object column `spec.expand` by one column per key (in the order the
    rows first name them; a key a row lacks reads 0). Returns (the new columns, the keys)."""
    k = cols.index(spec.expand)
    objs = []
    for d in dicts:
        v = d.pop(spec.expand, None)
        obj = json.loads(v) if isinstance(v, str) and v else (v if isinstance(v, dict) else {})
        objs.append(obj)
    keys = list(dict.fromkeys(key for obj in objs for key in obj))
    for d, cells, obj in zip(dicts, display, objs, strict=True):
        vals = [obj.get(key, 0) for key in keys]
        d.update(zip(keys, vals, strict=True))
        cells[k : k + 1] = [spec.expand_cell(v) if spec.expand_cell else v for v in vals]
    return cols[:k] + keys + cols[k + 1 :], keys
