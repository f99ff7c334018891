"""Several trees in one knowledge base: listing them, and reading one of them at a time.

Every built row carries the `source_id` of the tree it came from. A connection that reads the
knowledge base is scoped to one tree of each kind (`scope`): temporary views named like the
tables shadow them (SQLite looks in `temp` before `main`), each keeping the chosen trees' rows, so
every query in ckkb/queries reads one tree without knowing that others exist. The persistent views
are re-created as temporary ones over the scoped tables. A database with one tree of each kind
needs no scoping and gets none. Datasette's canned queries, whose tree is a request parameter,
get the same tables as common table expressions instead (`scoped_sql`).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ckkb.errors import CkkbError
from ckkb.kb.schema import BUILT, TABLES

KINDS = ("ck", "aiter")


@dataclass(frozen=True)
class TreeInfo:
    id: int
    name: str
    kind: str
    path: str
    version: str | None
    wheel_version: str | None
    commit: str | None
    files: int | None
    built: str | None
    rows: int  # the source id of the rows it reads: its own, or an identical earlier tree's


class UnknownTree(CkkbError):
    """A --tree NAME the knowledge base does not hold."""


def _lookup(name: str) -> str:
    return resources.files("ckkb.queries").joinpath("lookups", f"{name}.sql").read_text()


def list_trees(conn: sqlite3.Connection) -> list[TreeInfo]:
    """Every tree the knowledge base holds, in source-id order."""
    out = []
    for r in conn.execute(_lookup("trees")):
        name = r[1] or (r[4] or r[3].rstrip("/").rsplit("/", 1)[-1])  # a file from before names
        version = r[4] or r[5]  # an aiter tree's version is its wheel's
        out.append(TreeInfo(r[0], name, r[2], r[3], version, r[5], r[6], r[7], r[8], r[9]))
    return out


def choose(trees: list[TreeInfo], name: str | None) -> dict[str, TreeInfo]:
    """kind -> the tree read of that kind: `name`'s for its kind, the first built for the other."""
    chosen: dict[str, TreeInfo] = {}
    for t in trees:
        chosen.setdefault(t.kind, t)
    if name is not None:
        match = [t for t in trees if t.name == name]
        if not match:
            known = ", ".join(f"{t.name} ({t.kind})" for t in trees) or "none"
            raise UnknownTree(
                f"no tree named {name!r} in this knowledge base; it holds: {known}",
                hint="`ckkb trees` lists them; `ckkb build --ck NAME=PATH` adds one",
            )
        chosen[match[0].kind] = match[0]
    return chosen


def scoped_tables() -> list[str]:
    """The tables whose rows belong to one tree: every built table with a source_id."""
    return [t.name for t in TABLES.values() if t.kind == BUILT and "source_id" in t.column_names()]


def scope(conn: sqlite3.Connection, name: str | None = None) -> dict[str, TreeInfo]:
    """Make `conn` read tree `name` (and the first tree of the other kind); with no name, the
    first tree of each kind. Returns the trees it reads, by kind."""
    trees = list_trees(conn)
    chosen = choose(trees, name)
    several = len(trees) > len({t.kind for t in trees})
    if not several:
        return chosen  # one tree per kind: every row is the chosen tree's already
    ids = ", ".join(str(t.id) for t in chosen.values())
    rows = ", ".join(str(t.rows) for t in chosen.values())
    script = [f"drop view if exists temp.[{name}]" for name in [*scoped_tables(), "sources"]]
    script += [f"drop view if exists temp.[{view}]" for view, _ in _views()]
    script += [
        f"create temp view [{table}] as select * from main.[{table}] where source_id in ({rows})"
        for table in scoped_tables()
    ]
    script.append(f"create temp view sources as select * from main.sources where id in ({ids})")
    script += [_as_temp(body).rstrip().rstrip(";") for _, body in _views()]
    conn.executescript("begin;\n" + ";\n".join(script) + ";\ncommit;")  # one schema change
    return chosen


@cache
def _views() -> list[tuple[str, str]]:
    """(name, CREATE VIEW text) of ckkb/queries/views, in name order (package data: read once)."""
    out = []
    for f in sorted(
        resources.files("ckkb.queries").joinpath("views").iterdir(), key=lambda p: p.name
    ):
        if f.name.endswith(".sql"):
            out.append((f.name[:-4], f.read_text()))
    return out


_CREATE_VIEW = re.compile(r"\bCREATE\s+VIEW\b", re.IGNORECASE)


def _as_temp(body: str) -> str:
    return _CREATE_VIEW.sub("CREATE TEMP VIEW", body, count=1)


def _view_select(body: str) -> str:
    """The SELECT of a `CREATE VIEW name AS SELECT ...` file, comments dropped."""
    text = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("--"))
    m = re.search(r"\bCREATE\s+VIEW\s+\S+\s+AS\b", text, re.IGNORECASE)
    return text[m.end() :].strip().rstrip(";") if m else text


_WITH = re.compile(r"^\s*WITH(\s+RECURSIVE)?\b", re.IGNORECASE)


def scoped_sql(sql: str, param: str = "tree") -> str:
    """`sql` reading the tree named by the parameter `:param` (empty or absent: the first tree
    of each kind), for a statement that cannot use a scoped connection (a Datasette canned
    query): every table and view it reads becomes a common table expression of the same name."""
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    views = dict(_views())
    needed_views: list[str] = []
    needed_tables: set[str] = set()

    def visit(text: str) -> None:
        for view, vbody in views.items():
            if view not in needed_views and _mentions(text, view):
                visit(_view_select(vbody))
                needed_views.append(view)
        needed_tables.update(t for t in [*scoped_tables(), "sources"] if _mentions(text, t))

    visit(body)
    if not needed_tables:
        return sql
    ids = " UNION ALL ".join(
        f"SELECT coalesce((SELECT id FROM main.sources WHERE kind = '{k}' AND name = :{param}), "
        f"(SELECT min(id) FROM main.sources WHERE kind = '{k}'))"
        for k in KINDS
    )
    # a tree's own id picks its sources row; its rows id (`rows_of`) picks its rows
    rows = "SELECT coalesce(rows_of, id) FROM main.sources WHERE id IN (SELECT id FROM ckkb_scope)"
    ctes = [f"ckkb_scope(id) AS ({ids})", f"ckkb_rows(id) AS ({rows})"]
    for t in sorted(needed_tables):
        key, scope_of = ("id", "ckkb_scope") if t == "sources" else ("source_id", "ckkb_rows")
        ctes.append(
            f"[{t}] AS NOT MATERIALIZED (SELECT * FROM main.[{t}] "
            f"WHERE {key} IN (SELECT id FROM {scope_of}))"
        )
    # NOT MATERIALIZED: inlined like the view it stands for; a view read twice (arch_diff's
    # correlated subquery) would otherwise be computed whole and scanned per row (40x slower)
    ctes += [f"[{v}] AS NOT MATERIALIZED ({_view_select(views[v])})" for v in needed_views]
    m = _WITH.match(body)
    if m:
        recursive = "WITH RECURSIVE" if m.group(1) else "WITH"
        return f"{recursive} {', '.join(ctes)},{body[m.end() :]}"
    return f"WITH {', '.join(ctes)}\n{body}"


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None
