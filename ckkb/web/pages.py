"""What every ckkb page shares: the knowledge base being served, rendering, error pages, links."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

from datasette.utils.asgi import Request, Response

from ckkb.web import metadata, tree_scope
from ckkb.web.metadata import CannedQuery

TEMPLATES = Path(str(resources.files("ckkb.web").joinpath("templates")))
STATIC = Path(str(resources.files("ckkb.web").joinpath("static")))
PREFIX = "/-/ckkb"


def kb_database(datasette: Any, request: Request | None = None) -> Any:
    """The knowledge base being served: ?db=NAME, else the first database with a build_info
    table (None when there is none)."""
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
            except sqlite3.Error:
                db._ckkb = False
        if db._ckkb:
            return db
    return None


def canned(datasette: Any) -> dict[str, CannedQuery]:
    """The canned query files, parsed once per server (package data)."""
    cache = getattr(datasette, "_ckkb_canned", None)
    if cache is None:
        cache = datasette._ckkb_canned = metadata.canned_queries()
    return cache


async def page(
    datasette: Any, request: Request, template: str, context: dict[str, Any], status: int = 200
) -> Response:
    html = await datasette.render_template(
        template,
        {
            "ckkb_prefix": datasette.urls.path(PREFIX),
            "ckkb_tree": tree_scope.CURRENT.get(),
            **context,
        },
        request=request,
    )
    return Response.html(html, status=status)


async def error(
    datasette: Any,
    request: Request,
    title: str,
    errors: list[str],
    status: int = 400,
    **extra: Any,
) -> Response:
    return await page(
        datasette,
        request,
        "ckkb_error.html",
        {"title": title, "errors": errors, **extra},
        status=status,
    )


async def no_kb(datasette: Any, request: Request) -> Response:
    return await error(
        datasette,
        request,
        "No knowledge base",
        ["no ckkb knowledge base is being served"],
        status=404,
    )


def instance_href(datasette: Any, instance_id: Any, tree: str | None = None) -> str:
    """The explain page of an instance of `tree` (None: the tree the request reads)."""
    tree = tree_scope.CURRENT.get() if tree is None else tree
    path = datasette.urls.path(f"{PREFIX}/instance/{instance_id}")
    return f"{path}{tree_scope.query(tree)}"


def table_href(datasette: Any, database: str, table: str) -> str:
    """A table page showing the rows of the tree the request reads (ckkb.web.table_tree)."""
    return f"{datasette.urls.table(database, table)}{tree_scope.query(tree_scope.CURRENT.get())}"


def race_href(datasette: Any, race_id: Any) -> str:
    tree = tree_scope.query(tree_scope.CURRENT.get()).replace("?", "&")
    return str(datasette.urls.path(f"{PREFIX}/chart/race-spread?race={race_id}")) + tree
