"""The ckkb Datasette plugin: explain pages, charts, instance links, parameter checks, read-only guard.

Registered through Datasette's plugin hooks: as the `ckkb` entry point (pyproject.toml) and, so it
works without a reinstall, explicitly by `ckkb serve` (ckkb.web.app.make_datasette).

Routes (all under /-/ckkb):
  /-/ckkb                          index: charts and canned queries
  /-/ckkb/instance/<id>            explain page for one instance
  /-/ckkb/chart/race-spread?race=  TFLOPS per instance for one race, sorted
  /-/ckkb/chart/gate-census?arch=  device-name gates per directory, by effect

Bad canned-query parameters (unknown arch, malformed tile, missing parameter) are caught by the
ASGI wrapper before Datasette runs the SQL and answered with a 400 page (or JSON) that says what is
wrong; see ckkb.web.validate.
"""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import markupsafe
from datasette import hookimpl
from datasette.utils.asgi import Request, Response

from ckkb import queries
from ckkb.archs import ARCHS
from ckkb.web import charts, explain, metadata, validate
from ckkb.web.metadata import CannedQuery, description_html

TEMPLATES = Path(str(resources.files("ckkb.web").joinpath("templates")))
STATIC = Path(str(resources.files("ckkb.web").joinpath("static")))
PREFIX = "/-/ckkb"
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


# ---------------------------------------------------------------- helpers


def _kb_database(datasette, request: Request | None = None):
    """The knowledge base being served: ?db=NAME, else the first database with a build_info table."""
    name = request.args.get("db") if request is not None else None
    if name and name in datasette.databases:
        return datasette.databases[name]
    for db_name, db in datasette.databases.items():
        if db_name.startswith("_"):
            continue
        if getattr(db, "_ckkb", None) is None:
            try:
                conn = db.connect()
                try:
                    db._ckkb = bool(
                        conn.execute(
                            "select 1 from sqlite_master where name = 'build_info'"
                        ).fetchone()
                    )
                finally:
                    conn.close()
            except Exception:
                db._ckkb = False
        if db._ckkb:
            return db
    return None


def _canned(datasette, db_name: str) -> dict[str, CannedQuery]:
    cache = getattr(datasette, "_ckkb_canned", None)
    if cache is None:
        cache = datasette._ckkb_canned = metadata.canned_queries()
    return cache


async def _page(datasette, request, template: str, context: dict, status: int = 200) -> Response:
    html = await datasette.render_template(
        template, {"ckkb_prefix": datasette.urls.path(PREFIX), **context}, request=request
    )
    return Response.html(html, status=status)


async def _error(
    datasette, request, title: str, errors: list[str], status: int = 400, **extra
) -> Response:
    return await _page(
        datasette,
        request,
        "ckkb_error.html",
        {"title": title, "errors": errors, **extra},
        status=status,
    )


def instance_href(datasette, instance_id) -> str:
    return datasette.urls.path(f"{PREFIX}/instance/{instance_id}")


# ---------------------------------------------------------------- views


async def index_view(datasette, request):
    db = _kb_database(datasette, request)
    queries = list(_canned(datasette, db.name if db else "").values())
    return await _page(
        datasette,
        request,
        "ckkb_index.html",
        {
            "db_name": db.name if db else None,
            "queries": queries,
            "archs": ARCHS,
        },
    )


async def instance_view(datasette, request):
    raw = request.url_vars["id"]
    try:
        instance_id = int(raw)
    except ValueError:
        return await _error(
            datasette,
            request,
            "Not an instance id",
            [f"'{raw}' is not an instance id: expected an integer, e.g. /-/ckkb/instance/42"],
        )
    db = _kb_database(datasette, request)
    if db is None:
        return await _error(
            datasette,
            request,
            "No knowledge base",
            ["no ckkb knowledge base is being served"],
            status=404,
        )
    data = await db.execute_fn(lambda conn: explain.explain(conn, instance_id, _links(conn)))
    if data is None:
        return await _error(
            datasette,
            request,
            "No such instance",
            [f"instance {instance_id} is not in the knowledge base {db.name}"],
            status=404,
            links=[(datasette.urls.table(db.name, "instances"), "browse instances")],
        )
    return await _page(
        datasette,
        request,
        "ckkb_instance.html",
        {
            "db_name": db.name,
            "x": data,
            "instances_url": datasette.urls.table(db.name, "instances"),
            "list_url": datasette.urls.row(
                db.name, "instance_lists", str(data["instance"]["list_id"])
            )
            if data["list"]
            else None,
            "title": f"Instance {instance_id}",
        },
    )


def _race_data(conn: sqlite3.Connection, race: str | None):
    """(race_spread rows: every race's summary, from the race_spread canned query;
    [(name, tflops, instance_id or None)] of one race, best first)."""
    tables = {
        r[0] for r in conn.execute("select name from sqlite_master where type in ('table', 'view')")
    }
    if not {"race_results", "races", "races_summary"} <= tables:
        return [], []
    cur = conn.execute(queries.sql("race_spread"), {"race_id": ""})
    cols = [d[0] for d in cur.description]
    summaries = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    if not race:
        return summaries, []
    rows = conn.execute(
        "select id, name, tflops from race_results where race_id = ? and tflops is not null order by tflops desc, id",
        [race],
    ).fetchall()
    links = _links(conn)
    out = []
    for rid, name, tflops in rows:
        iids = links.get(rid) or [None]
        out.append((name, tflops, iids[0]))
    return summaries, out


_LINKS: dict[str, dict[int, list[int]]] = {}


def _links(conn: sqlite3.Connection) -> dict[int, list[int]]:
    """explain.race_links, computed once per database file (served immutable, so never stale)."""
    path = conn.execute("pragma database_list").fetchone()[2]
    if path not in _LINKS:
        _LINKS[path] = explain.race_links(conn)
    return _LINKS[path]


def race_label(s: dict) -> str:
    shape = "x".join(str(s.get(k)) for k in ("M", "N", "K") if s.get(k) is not None)
    bits = [s.get("op"), s.get("dtype"), s.get("layout"), shape, s.get("arch")]
    return " ".join(str(b) for b in bits if b)


def short_names(names: list[str]) -> list[str]:
    """Instance names without the prefix they all share (up to a separator), so bars read."""
    if len(names) < 2:
        return names
    prefix = names[0]
    for n in names[1:]:
        while not n.startswith(prefix):
            prefix = prefix[:-1]
    cut = max(prefix.rfind(c) for c in "<, ") + 1 if prefix else 0
    return [("…" + n[cut:]) if cut > 8 else n for n in names]


async def race_chart_view(datasette, request):
    db = _kb_database(datasette, request)
    if db is None:
        return await _error(
            datasette,
            request,
            "No knowledge base",
            ["no ckkb knowledge base is being served"],
            status=404,
        )
    race = (request.args.get("race") or "").strip()
    if race and not race.isdigit():
        return await _error(
            datasette,
            request,
            "Bad race id",
            [f"race '{race}' is not a race id: expected an integer (see the races table)"],
        )
    summaries, rows = await db.execute_fn(lambda conn: _race_data(conn, race or None))
    summary = next((s for s in summaries if str(s.get("id")) == race), None)
    if race and (summary is None or not rows):
        return await _error(
            datasette,
            request,
            "No results for that race",
            [f"race {race} has no results with TFLOPS in {db.name}"],
            status=404,
            links=[(datasette.urls.path(f"{PREFIX}/chart/race-spread"), "pick another race")],
        )
    svg = ""
    if rows:
        labels = short_names([n for n, _, _ in rows])
        bars = [
            charts.Bar(
                label=f"{k + 1}. {lab}",
                value=float(v),
                title=n,
                href=instance_href(datasette, i) if i is not None else None,
                highlight=(k == 0),
            )
            for k, ((n, v, i), lab) in enumerate(zip(rows, labels, strict=True))
        ]
        svg = charts.hbar_svg(
            bars, unit="TFLOPS", label_width=480, caption=f"race {race}: TFLOPS per instance"
        )
    races = [{"id": s["id"], "label": race_label(s), "n": s.get("timed")} for s in summaries]
    return await _page(
        datasette,
        request,
        "ckkb_chart.html",
        {
            "title": "Race spread" + (f" — race {race}: {race_label(summary)}" if summary else ""),
            "kind": "race",
            "svg": markupsafe.Markup(svg),
            "race": race,
            "races": races,
            "stats": summary,
            "linked": sum(1 for _, _, i in rows if i is not None),
            "race_spread_url": datasette.urls.path(f"/{db.name}/race_spread")
            + "?"
            + urlencode({"race_id": race})
            if race
            else None,
        },
    )


def _gate_census_data(conn: sqlite3.Connection, arch: str):
    """Rows of the gate_census canned query (the same SQL the CLI runs) for device-name gates."""
    tables = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
    if "gates" not in tables:
        return []
    cur = conn.execute(queries.sql("gate_census"), {"kind": "device_name", "arch": arch})
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


async def gate_chart_view(datasette, request):
    db = _kb_database(datasette, request)
    if db is None:
        return await _error(
            datasette,
            request,
            "No knowledge base",
            ["no ckkb knowledge base is being served"],
            status=404,
        )
    checked = validate.check(["arch"], [], {"arch": request.args.get("arch", "")})
    if not checked.ok:
        return await _error(datasette, request, "Bad parameter", checked.errors)
    arch = checked.normalised.get("arch", request.args.get("arch", "").strip())
    rows = await db.execute_fn(lambda conn: _gate_census_data(conn, arch))
    per_dir: dict[str, dict[str, float]] = {}
    for r in rows:
        effect = r.get("effect") or r.get("kind") or "?"
        cell = per_dir.setdefault(r["dir"], {})
        cell[effect] = cell.get(effect, 0) + (r.get("gates") or 0)
    series = sorted({e for v in per_dir.values() for e in v}, key=lambda e: (e != "exclude", e))
    ordered = sorted(per_dir.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    hrefs = {
        d: datasette.urls.table(db.name, "gates")
        + "?"
        + urlencode({"dir": d, "kind": "device_name", **({"arch": arch} if arch else {})})
        for d in per_dir
    }
    svg = charts.stacked_svg(
        ordered, series, caption="device-name gates per directory", hrefs=hrefs
    )
    return await _page(
        datasette,
        request,
        "ckkb_chart.html",
        {
            "title": "Gate census" + (f" — {arch}" if arch else ""),
            "kind": "gates",
            "svg": markupsafe.Markup(svg),
            "arch": arch,
            "archs": ARCHS,
            "totals": {s: sum(v.get(s, 0) for v in per_dir.values()) for s in series},
            "dirs": len(per_dir),
        },
    )


async def css_view(datasette, request):
    return Response((STATIC / "ckkb.css").read_text(), content_type="text/css; charset=utf-8")


# ---------------------------------------------------------------- hooks


@hookimpl
def register_routes(datasette):
    return [
        (r"^/-/ckkb/?$", index_view),
        (r"^/-/ckkb/instance/(?P<id>[^/]+)$", instance_view),
        (r"^/-/ckkb/chart/race-spread$", race_chart_view),
        (r"^/-/ckkb/chart/gate-census$", gate_chart_view),
        (r"^/-/ckkb/ckkb\.css$", css_view),
    ]


@hookimpl
def startup(datasette):
    # Datasette 0.65's default handle_exception calls rich's print_exception() from a coroutine
    # that runs outside the `except` block; with rich >= 13.8 that raises ValueError, which turns
    # every error page (invalid SQL, query over the time limit, 404) into an unhandled 500.
    # Without rich it renders its normal error page, so tell it rich is absent.
    import datasette.handle_exception as default_handler

    default_handler.rich = None


@hookimpl
def canned_queries(datasette, database, actor):
    """The canned queries for a ckkb knowledge base even under plain `datasette kb.db` (where our
    metadata is not loaded); under `ckkb serve` these are the same entries the metadata has."""
    db = datasette.databases.get(database)
    if db is None or database.startswith("_") or _kb_database(datasette) is not db:
        return None
    cache = getattr(datasette, "_ckkb_query_meta", None)
    if (
        cache is None
    ):  # built once per server: the files are package data and the database is immutable
        cache = datasette._ckkb_query_meta = metadata.query_metadata()
    return cache


@hookimpl
def prepare_jinja2_environment(env, datasette):
    from jinja2 import ChoiceLoader, FileSystemLoader

    # After the user's and Datasette's own loaders, so a --template-dir can still override ours.
    env.loader = ChoiceLoader([env.loader, FileSystemLoader(str(TEMPLATES))])


@hookimpl
def prepare_connection(conn, database, datasette):
    # Belt and braces: `ckkb serve` opens the knowledge base immutable, and every connection is
    # also query_only, so no statement that slips past Datasette's SELECT check can write.
    if not database.startswith("_"):
        conn.execute("pragma query_only = 1")


@hookimpl
def extra_css_urls(template, database, table, columns, view_name, request, datasette):
    return [datasette.urls.path(f"{PREFIX}/ckkb.css")]


@hookimpl
def menu_links(datasette, actor, request):
    return [
        {"href": datasette.urls.path(PREFIX), "label": "ckkb: queries and charts"},
        {"href": datasette.urls.path(f"{PREFIX}/chart/gate-census"), "label": "Chart: gate census"},
        {"href": datasette.urls.path(f"{PREFIX}/chart/race-spread"), "label": "Chart: race spread"},
    ]


def _is_instance_column(column: str, table: str | None) -> bool:
    return column == "instance_id" or column.endswith("_instance_id")


def _is_race_summary(row) -> bool:
    try:
        keys = set(row.keys())
    except AttributeError:
        return False
    return {"id", "winner", "spread", "best", "worst"} <= keys


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    """Links in table and canned-query cells:
    - instances: the `template` cell of `instances` rows (the id cell is Datasette's own row link)
      and any `instance_id` / `*_instance_id` cell -> the explain page;
    - `race_id`, `race_a`, `race_b` (and a race_spread row's `id`) -> the race-spread chart;
    - `registration_id` -> the registrations row;
    - a CK source path in a `*file` column -> $CKKB_CK_REPO_URL/<file>#L<the matching *line>."""
    if value is None or value == "":
        return None
    if table == "instances" and column == "id" and isinstance(value, int):
        # Datasette calls this for the id cell on the row page (on the table page the id cell is
        # its own row link and skips render_cell, hence the template cell below).
        return markupsafe.Markup(
            f'<a class="ckkb-instance" href="{instance_href(datasette, value)}" title="explain instance {value}">{value}</a>'
        )
    if table == "instances" and column == "template":
        try:
            iid = row["id"]
        except (IndexError, KeyError):
            return None
        return markupsafe.Markup(
            f'{markupsafe.escape(value)} <a class="ckkb-explain" href="{instance_href(datasette, iid)}" title="explain instance {iid}">explain</a>'
        )
    if isinstance(value, int) and (
        column in ("race_id", "race_a", "race_b")
        or (column == "id" and table == "races")
        or (column == "id" and table is None and _is_race_summary(row))
    ):
        href = datasette.urls.path(f"{PREFIX}/chart/race-spread?race={value}")
        return markupsafe.Markup(
            f'<a class="ckkb-race" href="{href}" title="chart of race {value}">{value}</a>'
        )
    if column == "registration_id" and isinstance(value, int) and database:
        href = datasette.urls.row(database, "registrations", str(value))
        return markupsafe.Markup(f'<a href="{href}" title="registration {value}">{value}</a>')
    if column.endswith("file") and isinstance(value, str) and value.startswith(CK_PREFIXES):
        line_col = column[: -len("file")] + "line"
        try:
            line = row[line_col]
        except (IndexError, KeyError):
            line = None
        url = explain.source_url(value, line if isinstance(line, int) else None)
        # In query results (table is None) a CK path shows as its file name, the full path in the
        # tooltip: the rows stay readable and the evidence column stays on screen.
        shown = ("…/" + value.rsplit("/", 1)[-1]) if table is None and "/" in value else value
        full = markupsafe.escape(value)
        if url:
            return markupsafe.Markup(
                f'<a href="{markupsafe.escape(url)}" title="{full}">{markupsafe.escape(shown)}</a>'
            )
        if shown != value:
            return markupsafe.Markup(f'<span title="{full}">{markupsafe.escape(shown)}</span>')
    if _is_instance_column(column, table) and isinstance(value, int):
        return markupsafe.Markup(
            f'<a class="ckkb-instance" href="{instance_href(datasette, value)}" title="explain instance {value}">{value}</a>'
        )
    return None


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        async def checked_app(scope, receive, send):
            if scope.get("type") == "http" and scope.get("method") not in (
                "GET",
                "HEAD",
                "OPTIONS",
            ):
                # Read-only service: no endpoint accepts a write (Datasette 0.65 would even answer
                # a POST to a read-only canned query with a 500).
                await Response.text(
                    "ckkb serve is read-only: only GET requests are accepted\n",
                    status=405,
                    headers={"Allow": "GET, HEAD"},
                ).asgi_send(send)
                return
            if scope.get("type") == "http" and scope.get("method") in ("GET", "HEAD"):
                response = await _check_canned(datasette, scope)
                if response is not None:
                    await response.asgi_send(send)
                    return
            await app(scope, receive, send)

        return checked_app

    return wrap


async def _dirs(datasette, db) -> set[str]:
    cache = getattr(db, "_ckkb_dirs", None)
    if cache is None:
        try:
            res = await db.execute(
                "select distinct dir from instances union select distinct dir from registrations"
            )
            cache = {r[0] for r in res.rows if r[0]}
        except Exception:
            cache = set()
        db._ckkb_dirs = cache
    return cache


async def _check_canned(datasette, scope) -> Response | None:
    """A 400 answer for a canned-query request with bad parameters, a redirect to the normalised
    spelling, or None to let Datasette answer."""
    path = scope.get("path", "")
    parts = path.strip("/").split("/")
    base = datasette.setting("base_url").strip("/")
    if base:
        if parts[: len(base.split("/"))] != base.split("/"):
            return None
        parts = parts[len(base.split("/")) :]
    if len(parts) != 2:
        return None
    route, name = parts
    fmt = None
    if "." in name:
        name, fmt = name.rsplit(".", 1)
    db = next((d for d in datasette.databases.values() if d.route == route), None)
    if db is None or db.name.startswith("_"):
        return None
    query = _canned(datasette, db.name).get(name)
    if query is None or not query.params:
        return None
    qs = scope.get("query_string", b"").decode("latin-1")
    args = dict(parse_qsl(qs, keep_blank_values=True))
    if not any(p in args for p in query.params) and fmt is None:
        if not query.required:
            return None  # a bare visit, nothing required: Datasette runs it and shows its form
        # A bare visit to a query with required parameters: show the form without running the
        # query on empty values (which would answer "0 rows", or every row there is).
        return await _page(
            datasette,
            Request({"csrftoken": lambda: "", **scope}, None),
            "ckkb_error.html",
            {
                "title": query.title,
                "errors": [],
                "intro": True,
                "query": query,
                "args": args,
                "description": markupsafe.Markup(description_html(query)),
                "form_action": datasette.urls.path(f"/{route}/{name}"),
                "archs": ARCHS,
            },
        )
    dirs = await _dirs(datasette, db) if "dir" in query.params else None
    checked = validate.check(query.params, query.required, args, dirs=dirs or None)
    # This runs outside Datasette's CSRF middleware; our pages only use GET forms.
    request = Request({"csrftoken": lambda: "", **scope}, None)
    if not checked.ok:
        if fmt == "json":
            return Response.json(
                {
                    "ok": False,
                    "error": "; ".join(checked.errors),
                    "errors": checked.errors,
                    "status": 400,
                    "title": "Invalid parameters",
                },
                status=400,
            )
        if fmt is not None:
            return Response.text("\n".join(checked.errors) + "\n", status=400)
        return await _error(
            datasette,
            request,
            f"{query.title}: invalid parameters",
            checked.errors,
            query=query,
            args=args,
            form_action=datasette.urls.path(f"/{route}/{name}"),
            archs=ARCHS,
            description=markupsafe.Markup(description_html(query)),
        )
    if checked.normalised:
        args.update(checked.normalised)
        return Response.redirect(path + "?" + urlencode(args))
    return None
