"""The ckkb Datasette plugin: pages, charts, cells, parameter checks, read-only guard.

Registered through Datasette's plugin hooks: as the `ckkb` entry point (pyproject.toml) and, so it
works without a reinstall, explicitly by `ckkb serve` (ckkb.web.app.make_datasette).

Routes:
  /                                the landing page: the four questions as forms (ckkb.web.landing)
  /-/ckkb                          index: charts and canned queries
  /-/ckkb/search?q=                instances, printed names and tiles together
  /-/ckkb/instance/<id>            explain page for one instance
  /-/ckkb/chart/race-spread?race=  TFLOPS per instance for one race, sorted
  /-/ckkb/chart/gate-census?arch=  device-name gates per directory, by effect

Every page and canned query takes `tree=NAME` (ckkb.web.tree_scope; empty: the first tree of each
kind); an unknown tree is a 400. Every canned query's page is ckkb_query.html, shaped by
ckkb.web.shape and ckkb.web.specs; cells are rendered by ckkb.web.cells. Bad canned-query
parameters (unknown arch, malformed tile, missing parameter, unknown tree) are caught by the
ASGI wrapper before Datasette runs the SQL and answered with a 400 page (or JSON) that says what is
wrong; see ckkb.web.validate.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode

import markupsafe
from datasette import hookimpl
from datasette.utils import to_css_class
from datasette.utils.asgi import Request, Response
from jinja2 import BaseLoader, Environment, TemplateNotFound

from ckkb.kb import db as kbdb
from ckkb.kb.schema import TABLES
from ckkb.queries import explain
from ckkb.web import (
    across,
    cells,
    choices,
    facets,
    gate_chart,
    landing,
    metadata,
    pages,
    race_chart,
    shape,
    specs,
    table_tree,
    tree_params,
    tree_scope,
    validate,
)
from ckkb.web.metadata import description_html

# ---------------------------------------------------------------- views


async def index_view(datasette: Any, request: Request) -> Response:
    db = pages.kb_database(datasette, request)
    archs = [v for v, _label in (await landing.loaded_choices(db)).get("arch", [])] if db else []
    return await pages.page(
        datasette,
        request,
        "ckkb_index.html",
        {
            "db_name": db.name if db else None,
            "queries": list(pages.canned(datasette).values()),
            "tree": tree_scope.arg(request),
            "archs": archs,
        },
    )


async def instance_view(datasette: Any, request: Request) -> Response:
    raw = request.url_vars["id"]
    try:
        instance_id = int(raw)
    except ValueError:
        return await pages.error(
            datasette,
            request,
            "Not an instance id",
            [f"'{raw}' is not an instance id: expected an integer, e.g. /-/ckkb/instance/42"],
        )
    if not -(2**63) <= instance_id < 2**63:  # beyond SQLite's integers: no such instance
        return await pages.error(
            datasette, request, "No such instance", [f"no instance {instance_id}"], status=404
        )
    db = pages.kb_database(datasette, request)
    if db is None:
        return await pages.no_kb(datasette, request)
    tree = tree_scope.arg(request)
    known = await tree_scope.trees(db)
    data = await tree_scope.execute(
        db, tree, lambda conn: explain.explain(conn, instance_id, race_chart.links(conn))
    )
    if data is None:
        ck = known.chosen(tree).get("ck")
        where = f" (tree {ck.name})" if ck is not None and known.several else ""
        return await pages.error(
            datasette,
            request,
            "No such instance",
            [f"instance {instance_id} is not in the knowledge base {db.name}{where}"],
            status=404,
            links=[(pages.table_href(datasette, db.name, "instances"), "browse instances")],
        )
    trees_table = await across.across_trees(datasette, db, data["instance"], tree)
    return await pages.page(
        datasette,
        request,
        "ckkb_instance.html",
        {
            "db_name": db.name,
            "x": data,
            "tile": shape.tile_of(data["instance"]),
            "trees_table": trees_table,
            "tree": known.chosen(tree).get("ck") if known.several else None,
            "instances_url": datasette.urls.table(db.name, "instances"),
            "list_url": datasette.urls.row(db.name, "instance_lists", _row_key(data["list"]))
            if data["list"]
            else None,
            "title": f"Instance {instance_id}",
        },
    )


def _row_key(row: dict[str, Any]) -> str:
    """A built table's row path: its (id, source_id) key."""
    sid = row.get("source_id")
    return str(row["id"]) if sid is None else f"{row['id']},{sid}"


async def css_view(datasette: Any, request: Request) -> Response:
    return Response((pages.STATIC / "ckkb.css").read_text(), content_type="text/css; charset=utf-8")


# ---------------------------------------------------------------- hooks


@hookimpl
def register_routes(datasette: Any) -> list[tuple[str, Any]]:
    return [
        (r"^/$", landing.landing_view),
        (r"^/-/ckkb/?$", index_view),
        (r"^/-/ckkb/search$", landing.search_view),
        (r"^/-/ckkb/instance/(?P<id>[^/]+)$", instance_view),
        (r"^/-/ckkb/chart/race-spread$", race_chart.race_chart_view),
        (r"^/-/ckkb/chart/gate-census$", gate_chart.gate_chart_view),
        (r"^/-/ckkb/ckkb\.css$", css_view),
    ]


@hookimpl
def startup(datasette: Any) -> None:
    # Datasette 0.65's default handle_exception calls rich's print_exception() from a coroutine
    # that runs outside the `except` block; with rich >= 13.8 that raises ValueError, which turns
    # every error page (invalid SQL, query over the time limit, 404) into an unhandled 500.
    # Without rich it renders its normal error page, so tell it rich is absent.
    import datasette.handle_exception as default_handler

    default_handler.rich = None


@hookimpl
def canned_queries(datasette: Any, database: str, actor: Any) -> dict[str, Any] | None:
    """The canned queries for a ckkb knowledge base even under plain `datasette kb.db` (where our
    metadata is not loaded); under `ckkb serve` these are the same entries the metadata has."""
    db = datasette.databases.get(database)
    if db is None or database.startswith("_") or pages.kb_database(datasette) is not db:
        return None
    cache = getattr(datasette, "_ckkb_query_meta", None)
    if (
        cache is None
    ):  # built once per server: the files are package data and the database is immutable
        cache = datasette._ckkb_query_meta = metadata.query_metadata()
    return cache


class _QueryTemplates(BaseLoader):
    """`query-<db>-<name>.html` for every canned query of ckkb, whatever the database is called:
    ckkb_query.html (Datasette asks for that name first when it renders a canned query)."""

    def __init__(self, names: list[str]):
        self.names = {to_css_class(n) for n in names}

    def get_source(
        self, environment: Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        if template.startswith("query-") and template.endswith(".html"):
            stem = template[len("query-") : -len(".html")]
            if any(stem.endswith("-" + n) for n in self.names):
                path = pages.TEMPLATES / "ckkb_query.html"
                return path.read_text(), str(path), lambda: True
        raise TemplateNotFound(template)

    def list_templates(self) -> list[str]:
        return []  # the names it answers depend on the database's name: none to list


@hookimpl
def prepare_jinja2_environment(env: Any, datasette: Any) -> None:
    from jinja2 import ChoiceLoader, FileSystemLoader

    # After the user's and Datasette's own loaders, so a --template-dir can still override ours.
    env.loader = ChoiceLoader(
        [
            env.loader,
            _QueryTemplates(list(pages.canned(datasette))),
            FileSystemLoader(str(pages.TEMPLATES)),
        ]
    )

    def ckkb_shape(
        name: str,
        database: str,
        columns: list[str],
        rows: list[Any],
        display_rows: list[Any],
        args: Any,
        extras: Any,
    ) -> Any:
        return shape.shape(
            specs.spec_for(name),
            columns,
            rows,
            display_rows,
            dict(args or {}),
            extras,
            datasette,
            database,
        )

    env.globals["ckkb_shape"] = ckkb_shape


@hookimpl
def extra_template_vars(
    template: str | None,
    database: str | None,
    view_name: str,
    request: Request | None,
    datasette: Any,
) -> Callable[[], Awaitable[dict[str, Any]]] | None:
    """For a canned query's page: its dropdowns (values from the knowledge base), which
    parameters may be empty, and the given values the knowledge base does not have."""
    if not (template or "").startswith("query-") or request is None or not database:
        return None
    name = next(
        (
            n
            for n in pages.canned(datasette)
            if template == f"query-{to_css_class(database)}-{to_css_class(n)}.html"
        ),
        None,
    )
    if name is None:
        return None

    async def inner() -> dict[str, Any]:
        q = pages.canned(datasette)[name]
        db = datasette.get_database(database)
        loaded = await landing.loaded_choices(db)
        args = {p: (request.args.get(p) or "").strip() for p in q.params}
        unknown = await tree_scope.execute(
            db, args.get("tree", ""), lambda conn: choices.unknown(conn, args, loaded)
        )
        desc = q.description.replace("`", "")
        return {
            "ckkb_page": {
                "choices": choices.for_params(list(q.params), loaded),
                "optional": set(q.optional),
                "free": choices.FREE_TEXT,
                "unknown": unknown,
                "lede": re.split(r"(?<!e\.g)\. ", desc)[0].rstrip(".") + "." if desc else q.title,
            }
        }

    return inner


@hookimpl
def prepare_connection(conn: sqlite3.Connection, database: str, datasette: Any) -> None:
    # Belt and braces: `ckkb serve` opens the knowledge base read-only (ckkb.web.live), and every
    # connection is also query_only, so no statement that slips past Datasette's SELECT check
    # can write.
    if not database.startswith("_"):
        conn.execute("pragma query_only = 1")


@hookimpl
def extra_css_urls(
    template: str,
    database: str | None,
    table: str | None,
    columns: list[str] | None,
    view_name: str,
    request: Request | None,
    datasette: Any,
) -> list[str]:
    return [datasette.urls.path(f"{pages.PREFIX}/ckkb.css")]


@hookimpl
def menu_links(datasette: Any, actor: Any, request: Request | None) -> list[dict[str, str]]:
    return [
        {"href": datasette.urls.path("/"), "label": "ckkb: the questions"},
        {"href": datasette.urls.path(pages.PREFIX), "label": "ckkb: queries and charts"},
        {"href": datasette.urls.path(f"{pages.PREFIX}/search"), "label": "Search"},
    ]


SEARCH_HINT = """
document.querySelectorAll('form.filters').forEach(function (f) {
  var p = document.createElement('p');
  p.className = 'ckkb-note';
  p.innerHTML = 'This box searches %s. Tiles (256x224x64), printed names and instances together: '
    + '<a href="%s">ckkb search</a>.';
  f.insertAdjacentElement('afterend', p);
});
"""
SEARCHED = {
    "instances": "the template, list name and file of each instance",
    "instance_keys": "the names instances print and their lists",
}


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
    """On the tables with full-text search, say what their search box looks in and point to the
    search that looks everywhere."""
    if view_name != "table" or table not in SEARCHED or request is None:
        return None
    q = request.args.get("_search") or ""
    href = datasette.urls.path(f"{pages.PREFIX}/search") + "?" + urlencode({"q": q})
    return SEARCH_HINT % (SEARCHED[table], href.replace("'", "%27"))


@hookimpl
def register_facet_classes() -> list[type]:
    return [facets.VocabFacet]


@hookimpl
def render_cell(
    row: Any, value: Any, column: str, table: str | None, database: str, datasette: Any
) -> Any:
    """See ckkb.web.cells: links, yes/no, numbers with units, the vocabulary, whole text."""
    return cells.render(row, value, column, table, database, datasette)


@hookimpl
def asgi_wrapper(datasette: Any) -> Callable[[Any], Any]:
    def wrap(app: Any) -> Any:
        async def checked_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
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
            tree = ""
            if scope.get("type") == "http" and scope.get("method") in ("GET", "HEAD"):
                scope = _default_columns(datasette, scope)
                tree, response, scope = await _check_tree(datasette, scope)
                if response is None:
                    response = _check_row_key(datasette, scope)
                if response is None:
                    response = await _check_canned(datasette, scope)
                if response is not None:
                    await response.asgi_send(send)
                    return
            token = tree_scope.CURRENT.set(tree)
            try:
                await app(scope, receive, send)
            finally:
                tree_scope.CURRENT.reset(token)

        return checked_app

    return wrap


def _check_row_key(datasette: Any, scope: dict[str, Any]) -> Response | None:
    """A 404 for a row URL that does not name the whole key: a built table's rows are keyed by
    (key, source_id), one per tree, and Datasette answers a part of a key with a 500."""
    parts = scope.get("path", "").strip("/").split("/")
    if len(parts) != 3 or parts[1] not in TABLES:
        return None
    db = next((d for d in datasette.databases.values() if d.route == parts[0]), None)
    if db is None or db is not pages.kb_database(datasette):
        return None
    key = kbdb.primary_key(TABLES[parts[1]])
    if not isinstance(key, tuple):
        return None
    given = parts[2].rsplit(".", 1)[0] if parts[2].endswith((".json", ".csv")) else parts[2]
    if given.count(",") + 1 == len(key):
        return None
    return Response.text(
        f"a row of {parts[1]} is named by {', '.join(key)}: /{parts[0]}/{parts[1]}/"
        + ",".join(k.upper() for k in key)
        + "\n",
        status=404,
    )


def _default_columns(datasette: Any, scope: dict[str, Any]) -> dict[str, Any]:
    """A table page whose URL picks no columns shows metadata.yaml's `default_columns` (the
    request is rewritten, not redirected: Datasette's own links then carry the `_col`s)."""
    defaults = metadata.static_metadata().get("default_columns") or {}
    parts = scope.get("path", "").strip("/").split("/")
    if len(parts) != 2 or parts[1] not in defaults:
        return scope
    qs = scope.get("query_string", b"").decode("latin-1")
    args = parse_qsl(qs, keep_blank_values=True)
    if any(k in ("_col", "_nocol") for k, _ in args):
        return scope
    db = next((d for d in datasette.databases.values() if d.route == parts[0]), None)
    if db is None or db is not pages.kb_database(datasette):
        return scope
    extra = urlencode([("_col", c) for c in defaults[parts[1]]])
    return {**scope, "query_string": (qs + "&" + extra if qs else extra).encode("latin-1")}


async def _check_tree(
    datasette: Any, scope: dict[str, Any]
) -> tuple[str, Response | None, dict[str, Any]]:
    """The request's `tree` ('' for the defaults or when it is not a ckkb page's), a 400 page
    for a tree the knowledge base does not hold on a ckkb page or a table page (canned queries:
    below), and the scope (a table page's `tree` turned into its filter, ckkb.web.table_tree)."""
    qs = scope.get("query_string", b"").decode("latin-1")
    tree = dict(parse_qsl(qs, keep_blank_values=True)).get("tree", "").strip()
    request = Request({"csrftoken": lambda: "", **scope}, None)
    db = pages.kb_database(datasette, request)
    if db is None:
        return "", None, scope
    known = await tree_scope.trees(db)  # loaded here, so that cells can read it (render_cell)
    error = known.error(tree)
    path = "/" + scope.get("path", "").lstrip("/")
    base = "/" + datasette.setting("base_url").strip("/")
    rel = "/" + path[len(base) :].lstrip("/") if path.startswith(base) else path
    table = table_tree.table_page(datasette, rel)
    if error is None:
        return tree, None, table_tree.scoped(scope, table, known, tree) if table else scope
    if rel == "/" or rel.startswith(pages.PREFIX + "/") or rel == pages.PREFIX or table:
        return "", await pages.error(datasette, request, "Unknown tree", [error]), scope
    return "", None, scope


async def _dirs(db: Any) -> set[str]:
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


async def _check_canned(datasette: Any, scope: dict[str, Any]) -> Response | None:
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
    query = pages.canned(datasette).get(name)
    if query is None or not query.params:
        return None
    qs = scope.get("query_string", b"").decode("latin-1")
    args = dict(parse_qsl(qs, keep_blank_values=True))
    # a visit with no parameter but the tree (a link that keeps the tree) is a bare visit too
    if not any(p in args for p in query.params if p != "tree") and fmt is None:
        if not query.required:
            return None  # a bare visit, nothing required: Datasette runs it and shows its form
        loaded = await landing.loaded_choices(db)
        # A bare visit to a query with required parameters: show the form without running the
        # query on empty values (which would answer "0 rows", or every row there is).
        return await pages.page(
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
                "choices": choices.for_params(list(query.params), loaded),
            },
        )
    loaded = await landing.loaded_choices(db)
    dirs = await _dirs(db) if "dir" in query.params else None
    archs = [v for v, _label in loaded.get("arch", [])]  # the archs this knowledge base answers
    checked = validate.check(
        query.params, query.required, args, dirs=dirs or None, archs=archs or None
    )
    checked.errors += tree_params.errors(await tree_scope.trees(db), query.params, args)
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
        return await pages.error(
            datasette,
            request,
            f"{query.title}: invalid parameters",
            checked.errors,
            query=query,
            args=args,
            form_action=datasette.urls.path(f"/{route}/{name}"),
            choices=choices.for_params(list(query.params), loaded),
            description=markupsafe.Markup(description_html(query)),
        )
    if checked.normalised:
        args.update(checked.normalised)
        return Response.redirect(path + "?" + urlencode(args))
    return None
