"""Datasette's own table pages read `?tree=NAME` as ckkb's pages do.

A built table holds every tree's rows, each with its `source_id`. Datasette would read `tree=NAME`
as a filter on a column `tree` that no table has, and answer "0 rows where tree = NAME". The
plugin's ASGI wrapper rewrites the request instead: `tree=NAME` becomes `source_id__in=IDS`, the
trees that name reads (its own and the first tree of the other kind, as everywhere), so the page
shows that tree's rows with Datasette's own filter, facets and paging. An empty `tree` is dropped
(every tree's rows, as without it); a name the knowledge base does not hold is a 400
(ckkb.web.plugin's tree check, which asks `table_page` whether the path is a table page).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode

from ckkb.kb.schema import TABLES
from ckkb.web import pages
from ckkb.web.tree_scope import Trees

SUFFIXES = (".json", ".csv")


def table_page(datasette: Any, path: str) -> str | None:
    """The table `path` (relative to the base URL) shows, when it is a table page of the
    knowledge base being served (its .json and .csv too); None otherwise."""
    parts = path.strip("/").split("/")
    if len(parts) != 2:
        return None
    route, table = parts
    for suffix in SUFFIXES:
        table = table.removesuffix(suffix)
    if table not in TABLES:
        return None
    db = next((d for d in datasette.databases.values() if d.route == route), None)
    if db is None or db is not pages.kb_database(datasette):
        return None
    return table


def scoped(scope: dict[str, Any], table: str, known: Trees, tree: str) -> dict[str, Any]:
    """`scope` with its `tree` argument turned into a filter on the table's source_id (a name
    `known.error` accepted; '' reads every tree, as a table page without it does)."""
    qs = scope.get("query_string", b"").decode("latin-1")
    args = parse_qsl(qs, keep_blank_values=True)
    if not any(k == "tree" for k, _ in args):
        return scope
    rest = [(k, v) for k, v in args if k != "tree"]
    if tree and "source_id" in TABLES[table].column_names():
        ids = sorted(t.rows for t in known.chosen(tree).values())
        rest.append(("source_id__in", ",".join(map(str, ids))))
    return {**scope, "query_string": urlencode(rest).encode("latin-1")}
