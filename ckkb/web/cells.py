"""How one cell reads, for Datasette's render_cell hook (tables, rows and canned-query results).

- yes/no in colour for 0/1 columns (metadata.yaml `yes_no`) and for a canned query's per-arch
  counts (pool: "yes" with the count of registering calls in the tooltip);
- numbers right-aligned, at their unit's precision, with the unit (metadata.yaml `units`);
- links: instances to their explain page, races to their chart, registrations to their row, CK
  source paths to $CKKB_CK_REPO_URL (shown as the file name in query results, full path on hover);
- pipeline and scheduler through the one vocabulary (ckkb.fields): `v3`, `Default`; a template
  parameter's name is shown as such;
- a race's dtype / layout that is not a word of the vocabulary is marked as not read from the log;
- an audit finding's severity in its colour;
- in query results, text is never cut (decisive columns wrap instead: see ckkb.css).
"""

from __future__ import annotations

from functools import cache
from html import escape
from typing import Any

import markupsafe

from ckkb import vocabulary
from ckkb.archs import is_arch_column
from ckkb.fields import pipeline_word, scheduler_word
from ckkb.queries.explain import source_url
from ckkb.web import metadata, pages, tree_scope

CK_PREFIXES = (
    "library/",
    "include/",
    "profiler/",
    "example/",
    "test/",
    "client_example/",
    "codegen/",
    "tile_engine/",
)
DIGITS = {
    "ms": ".4g",
    "TFLOP/s": ",.1f",
    "TFLOPS": ",.1f",
    "GB/s": ",.1f",
    "µs": ",.2f",
    "×": ".2f",
}


# Package data, read once per process (module state on purpose): it never changes while serving.
@cache
def _static() -> tuple[dict[str, str], frozenset[str]]:
    meta = metadata.static_metadata()
    return dict(meta.get("units") or {}), frozenset(meta.get("yes_no") or ())


def _get(row: Any, key: str) -> Any:
    try:
        return row[key]
    except (IndexError, KeyError):
        return None


def _keys(row: Any) -> set[str]:
    try:
        return set(row.keys())
    except AttributeError:
        return set()


def number(value: float | int, unit: str = "", title: str = "") -> markupsafe.Markup:
    if isinstance(value, float):
        text = format(value, DIGITS.get(unit, ".4g"))
    else:
        text = str(value)
    t = f' title="{escape(title)}"' if title else ""
    u = f' <span class="ckkb-unit">{escape(unit)}</span>' if unit else ""
    return markupsafe.Markup(f'<span class="ckkb-num"{t}>{escape(text)}{u}</span>')


def yes_no(flag: bool, title: str = "") -> markupsafe.Markup:
    t = f' title="{escape(title)}"' if title else ""
    word, cls = ("yes", "ckkb-yes") if flag else ("no", "ckkb-no")
    return markupsafe.Markup(f'<span class="{cls}"{t}>{word}</span>')


def breakable(text: str) -> markupsafe.Markup:
    """The whole text, escaped, breakable after each '/', '_' and ',' (a long path or C++ name
    wraps at its separators, never mid-word: see ckkb.css)."""
    out = escape(text)
    for sep in ("/", "_", ","):
        out = out.replace(sep, sep + "<wbr>")
    return markupsafe.Markup(out)


def _link(href: str, text: Any, title: str, cls: str = "") -> markupsafe.Markup:
    c = f' class="{cls}"' if cls else ""
    return markupsafe.Markup(
        f'<a{c} href="{escape(href)}" title="{escape(title)}">{escape(str(text))}</a>'
    )


def _is_race_summary(row: Any) -> bool:
    return {"id", "winner", "spread", "best", "worst"} <= _keys(row)


def _links(
    row: Any, value: Any, column: str, table: str | None, database: str, ds: Any
) -> markupsafe.Markup | None:

    if table == "instances" and column in ("id", "template"):
        tree = tree_scope.name_of(ds, database, _get(row, "source_id")) or ""
    if table == "instances" and column == "id" and isinstance(value, int):
        # the row page's id cell (on the table page Datasette links it to the row itself)
        return _link(
            pages.instance_href(ds, value, tree),
            value,
            f"explain instance {value}",
            "ckkb-instance",
        )
    if table == "instances" and column == "template":
        iid = _get(row, "id")
        if iid is None:
            return None
        return markupsafe.Markup(
            f'{escape(value)} <a class="ckkb-explain" href="{pages.instance_href(ds, iid, tree)}" '
            f'title="explain instance {iid}">explain</a>'
        )
    if isinstance(value, int) and (
        column in ("race_id", "race_a", "race_b")
        or (column == "id" and table == "races")
        or (column == "id" and table is None and _is_race_summary(row))
    ):
        return _link(pages.race_href(ds, value), value, f"chart of race {value}", "ckkb-race")
    if column == "registration_id" and isinstance(value, int) and database:
        # a registration row is keyed by (id, source_id): one per tree; a canned query's row has
        # no source_id: the CK tree the request reads
        source = _get(row, "source_id")
        if not isinstance(source, int):
            source = tree_scope.source_id(ds, database)
        if isinstance(source, int):
            href = ds.urls.row(database, "registrations", f"{value},{source}")
        else:
            href = ds.urls.table(database, "registrations") + f"?id={value}"
        return _link(href, value, f"registration {value}")
    if column.endswith("file") and isinstance(value, str) and value.startswith(CK_PREFIXES):
        line = _get(row, column[: -len("file")] + "line")
        url = source_url(value, line if isinstance(line, int) else None)
        shown = breakable(value)
        if url:
            return markupsafe.Markup(
                f'<a class="ckkb-path" href="{escape(url)}" title="{escape(value)}">{shown}</a>'
            )
        return markupsafe.Markup(f'<span class="ckkb-path" title="{escape(value)}">{shown}</span>')
    if (column == "instance_id" or column.endswith("_instance_id")) and isinstance(value, int):
        return _link(
            pages.instance_href(ds, value), value, f"explain instance {value}", "ckkb-instance"
        )
    return None


def _vocabulary(value: Any, column: str) -> markupsafe.Markup | None:
    if column in ("pipeline", "scheduler") and isinstance(value, str):
        word = pipeline_word(value) if column == "pipeline" else scheduler_word(value)
        if word is None:
            return markupsafe.Markup(
                f'<span class="ckkb-param" title="template parameter {escape(value)}: the '
                f'registering call binds it">{escape(value)}</span>'
            )
        if word != value:
            return markupsafe.Markup(f'<span title="{escape(value)}">{escape(word)}</span>')
        return None
    known = (
        vocabulary.dtype(value) is not None if column == "dtype" else value in vocabulary.LAYOUTS
    )
    if column in ("dtype", "layout") and isinstance(value, str) and not known:
        return markupsafe.Markup(
            f'<span class="ckkb-unknown" title="not a {column} ckkb knows: the log line read '
            f"'{escape(value)}'\">?</span>"
        )
    return None


def render(row: Any, value: Any, column: str, table: str | None, database: str, ds: Any) -> Any:
    """The cell's HTML, or None to let Datasette render it."""
    if value is None or value == "":
        return None
    link = _links(row, value, column, table, database, ds)
    if link is not None:
        return link
    units, flags = _static()
    if isinstance(value, int) and not isinstance(value, bool):
        if column in flags and value in (0, 1):
            return yes_no(bool(value))
        if table is None and is_arch_column(column):  # a query's per-arch count of calls
            return yes_no(value > 0, f"{value} registering call{'s' * (value != 1)} add it")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        unit = units.get(column, "")
        if unit.startswith("@"):
            unit = str(_get(row, unit[1:]) or "")
        return number(value, unit)
    if column == "severity" and value in ("error", "warning", "note"):
        return markupsafe.Markup(f'<span class="ckkb-sev ckkb-sev-{value}">{value}</span>')
    if table in ("races", None) or column in ("pipeline", "scheduler"):
        vocab = _vocabulary(value, column)
        if vocab is not None:
            return vocab
    if table is None and isinstance(value, str):
        return breakable(value)  # the whole text: query results are never cut
    return None
