"""Which tree a page reads: the `tree` request parameter, checked, and connections scoped to it.

A knowledge base may hold several CK and aiter trees (ckkb.kb.trees). Every ckkb page and canned
query takes `?tree=NAME` (empty or absent: the first tree of each kind, as the CLI's default).
Canned queries read it as the `:tree` parameter of their scoped SQL (ckkb.web.metadata); the
web's own pages run their Python (ckkb.queries.explain, the charts, search) on a connection that
ckkb.kb.trees.scope has scoped to the tree, so that code never knows other trees exist.

The tree a request asked for is also kept in a context variable for the length of the request,
so that cells (ckkb.web.cells) can link an instance id to the explain page of the same tree.
"""

from __future__ import annotations

import contextvars
import difflib
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ckkb.kb.trees import TreeInfo, list_trees, scope
from ckkb.web import live

T = TypeVar("T")


@dataclass(frozen=True)
class Trees:
    """The trees of a served knowledge base, in source-id order."""

    all: tuple[TreeInfo, ...]

    @property
    def several(self) -> bool:
        """More than one tree of some kind: reads must be scoped."""
        return len(self.all) > len({t.kind for t in self.all})

    def names(self) -> list[str]:
        return [t.name for t in self.all]

    def named(self, name: str) -> TreeInfo | None:
        return next((t for t in self.all if t.name == name), None)

    def chosen(self, name: str) -> dict[str, TreeInfo]:
        """kind -> the tree read of that kind for `?tree=name` ('' = the defaults)."""
        out: dict[str, TreeInfo] = {}
        for t in self.all:
            out.setdefault(t.kind, t)
        picked = self.named(name) if name else None
        if picked is not None:
            out[picked.kind] = picked
        return out

    def of_kind(self, kind: str) -> list[TreeInfo]:
        return [t for t in self.all if t.kind == kind]

    def error(self, name: str) -> str | None:
        """The message for an unknown tree name (None when known or empty)."""
        if not name or self.named(name) is not None:
            return None
        near = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        held = ", ".join(f"{t.name} ({t.kind})" for t in self.all) or "none"
        return f"unknown tree '{name}'{hint}: this knowledge base holds {held}"

    def is_default(self, name: str) -> bool:
        t = self.named(name)
        return t is None or self.of_kind(t.kind)[0] is t


async def trees(db: Any) -> Trees:
    """The served file's trees, read once per file: again when a build renamed another file
    over it (one stat per call; a request for a tree just added must not meet the old list)."""
    ident = live.file_ident(db.path) if db.path else (0, 0)
    cache = getattr(db, "_ckkb_trees", None)
    if cache is None or getattr(db, "_ckkb_trees_ident", None) != ident:
        cache = db._ckkb_trees = Trees(tuple(await db.execute_fn(list_trees)))
        db._ckkb_trees_ident = ident
    return cache


def cached(datasette: Any, database: str | None) -> Trees | None:
    """The trees of a served database when already read (render_cell cannot wait for a query)."""
    db = datasette.databases.get(database) if database else None
    return getattr(db, "_ckkb_trees", None)


def name_of(datasette: Any, database: str | None, source_id: Any) -> str | None:
    """The name of the tree whose rows carry `source_id`, when it is not the default of its kind
    (links need none); of trees sharing those rows (`rows_of`), the one the request reads."""
    known = cached(datasette, database)
    if known is None:
        return None
    current = known.chosen(CURRENT.get()).values()
    t = next((t for t in current if t.rows == source_id), None)
    t = t or next((t for t in known.all if t.rows == source_id), None)
    return t.name if t is not None and not known.is_default(t.name) else None


def source_id(datasette: Any, database: str | None, kind: str = "ck") -> int | None:
    """The source id of the rows of the `kind` tree the request reads (row pages' keys end with
    it)."""
    known = cached(datasette, database)
    t = known.chosen(CURRENT.get()).get(kind) if known else None
    return t.rows if t is not None else None


def arg(request: Any) -> str:
    """The `tree` request parameter, stripped ('' when absent)."""
    return str(request.args.get("tree") or "").strip()


# The tree of the request being answered (set by the plugin's ASGI wrapper): render_cell gets no
# request, and its instance links must stay in the tree the page reads.
CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("ckkb_tree", default="")


def query(name: str) -> str:
    """`?tree=NAME` (or '' for the default tree), for links that stay in the tree."""
    from urllib.parse import quote

    return f"?tree={quote(name)}" if name else ""


# Per SQL thread (Datasette runs queries in a small pool of threads), that thread's connections
# scoped to one tree each, kept across requests: scoping creates temporary views, which a fresh
# connection per request would redo. Keyed by (file, tree); reopened when a build replaced the
# file (its inode changed), like ckkb.web.live.LiveDatabase.
_local = threading.local()


def scoped_connection(path: str, tree: str) -> sqlite3.Connection:
    """A read-only connection to `path` reading tree `tree` ('' = the defaults)."""
    conns: dict[tuple[str, str], tuple[tuple[int, int], sqlite3.Connection]]
    conns = _local.__dict__.setdefault("conns", {})
    ident = live.file_ident(path)
    found = conns.get((path, tree))
    if found is not None and found[0] == ident:
        return found[1]
    if found is not None:
        found[1].close()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    try:
        live.limit(conn)
        scope(conn, tree or None)
        conn.execute("pragma query_only = 1")
    except BaseException:
        conn.close()
        raise
    conns[(path, tree)] = (ident, conn)
    return conn


async def execute(db: Any, tree: str, fn: Callable[[sqlite3.Connection], T]) -> T:
    """fn(conn) with conn reading tree `tree` (a name `Trees.error` accepted; '' = defaults)."""
    known = await trees(db)
    if not known.several or not db.path:
        return await db.execute_fn(fn)
    path = str(db.path)
    return await db.execute_fn(lambda _conn: fn(scoped_connection(path, tree)))


async def execute_each(
    db: Any, names: list[str], fn: Callable[[str, sqlite3.Connection], T]
) -> dict[str, T]:
    """fn(name, conn) for each tree name, each on a connection scoped to that tree, in one call
    of the SQL thread (the explain page's availability across trees)."""
    known = await trees(db)
    if not known.several or not db.path:
        return await db.execute_fn(lambda conn: {n: fn(n, conn) for n in names})
    path = str(db.path)
    return await db.execute_fn(lambda _conn: {n: fn(n, scoped_connection(path, n)) for n in names})
