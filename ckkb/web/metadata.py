"""Datasette metadata for a knowledge base, assembled at load time from what already exists.

- Title, description and per-table extras (facets, labels, sort): ckkb/web/metadata.yaml.
- Table and column descriptions: the schema's own `@table(doc)` / `col(doc)` texts (ckkb.kb.schema),
  never duplicated here.
- Canned queries: every ckkb/queries/canned/NAME.sql, with its header comments
  (`-- title:`, `-- description:`, `-- params: a, b`) as title, description and parameters. The SQL
  is read from the file the CLI also runs, never copied.

A parameter is optional (may be left empty) when the SQL itself gives the empty value a meaning
(`:name = ''` or `:name IS NULL`, e.g. "empty = any tile") or when `-- params:` lists it as
`name?`. Every other parameter is required, and the plugin answers a readable 400 page when one
is missing.

Every canned query that reads a tree's rows also takes `tree` (optional: empty = the first tree
of each kind): Datasette runs the file's SQL rewritten by ckkb.kb.trees.scoped_sql (`served_sql`),
so the files stay plain. One that names its trees itself (version_diff) does not (`with_tree`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cache
from html import escape
from importlib import resources
from typing import Any

import yaml

from ckkb.kb.schema import SCHEMA_VERSION, TABLES
from ckkb.kb.trees import scoped_sql

TREE = "tree"  # the parameter every canned query takes (ckkb.web.tree_scope)

_HEADER = re.compile(r"^--\s*(title|description|params)\s*:\s*(.*)$", re.IGNORECASE)
_CONT = re.compile(r"^--\s?(.*)$")


@dataclass(frozen=True)
class CannedQuery:
    name: str
    title: str
    description: str
    params: tuple[str, ...]  # in header order, without the optional marker
    optional: frozenset[str] = field(default_factory=frozenset)
    sql: str = ""

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(p for p in self.params if p not in self.optional)


def parse_canned(name: str, text: str) -> CannedQuery:
    """Read the header comments of a canned query file.

    Header lines come first; a `--` line right after `-- description:` that is not itself a
    header continues the description. Parameters found in the SQL but missing from `-- params:`
    are appended (Datasette would ask for them anyway).
    """
    title, desc, params, optional = name, "", [], set()
    last = None
    for line in text.splitlines():
        s = line.strip()
        if not s:
            last = None
            continue
        if not s.startswith("--"):
            break
        m = _HEADER.match(s)
        if m:
            key, val = m.group(1).lower(), m.group(2).strip()
            last = key
            if key == "title":
                title = val or name
            elif key == "description":
                desc = val
            else:
                for p in (x.strip() for x in val.split(",")):
                    if not p:
                        continue
                    p = p.lstrip(":")
                    if p.endswith("?"):
                        p = p[:-1]
                        optional.add(p)
                    params.append(p)
            continue
        c = _CONT.match(s)
        if last == "description" and c and c.group(1).strip():
            desc = f"{desc} {c.group(1).strip()}".strip()
        else:
            last = None
    for p in _sql_params(text):
        if p not in params:
            params.append(p)
    body = _strip_comments(text)
    for p in params:
        if re.search(
            rf"(?<![:\w]):{p}\s*(=\s*''|is\s+null\b)|''\s*=\s*:{p}\b", body, re.IGNORECASE
        ):
            optional.add(p)
    return CannedQuery(name, title, desc, tuple(params), frozenset(optional), text)


def _strip_comments(sql: str) -> str:
    """The SQL without -- comments (whole-line or trailing), string literals emptied to ''."""
    out = []
    for line in sql.splitlines():
        line = re.sub(r"'(?:[^']|'')*'", "''", line)  # literals first, so '--' inside one survives
        out.append(line.split("--", 1)[0])
    return "\n".join(out)


def _sql_params(sql: str) -> list[str]:
    """Named parameters (:name) used by the SQL, outside comments and string literals."""
    out: list[str] = []
    body = _strip_comments(sql)
    for m in re.finditer(r"(?<![:\w]):([A-Za-z_]\w*)", body):
        if m.group(1) not in out and not m.group(1).startswith("_"):
            out.append(m.group(1))
    return out


def canned_queries() -> dict[str, CannedQuery]:
    """Every canned query file under ckkb/queries/canned, by name."""
    out: dict[str, CannedQuery] = {}
    folder = resources.files("ckkb.queries").joinpath("canned")
    if not folder.is_dir():
        return out
    for f in sorted(folder.iterdir(), key=lambda p: p.name):
        if f.name.endswith(".sql"):
            name = f.name[:-4]
            out[name] = with_tree(parse_canned(name, f.read_text()))
    return out


def with_tree(q: CannedQuery) -> CannedQuery:
    """`q` with the optional `tree` parameter, where the tree changes its answer: its served SQL
    reads a tree's rows. A query that names its trees itself (version_diff's `from` and `to`,
    read from main.*) or reads rows of no tree (fleet_spread's harness results) does not take
    it: a dropdown there would change nothing."""
    if TREE in q.params or not _TREE_PARAM.search(_scoped(q.sql)):
        return q
    return replace(q, params=(*q.params, TREE), optional=q.optional | {TREE})


_TREE_PARAM = re.compile(rf"(?<![:\w]):{TREE}\b")


def served_sql(q: CannedQuery) -> str:
    """The SQL Datasette runs for a canned query: the file's, reading the tree `:tree` names."""
    return _scoped(q.sql)


@cache
def _scoped(sql: str) -> str:
    return scoped_sql(sql, TREE)


def description_html(q: CannedQuery) -> str:
    """The description with `name` as <code>, and which parameters may be left empty."""
    text = escape(q.description)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    if q.params:
        req = [f"<code>{escape(p)}</code>" for p in q.required]
        opt = [f"<code>{escape(p)}</code>" for p in q.params if p in q.optional]
        bits = []
        if req:
            bits.append("required: " + ", ".join(req))
        if opt:
            bits.append("may be left empty: " + ", ".join(opt))
        text += f' <span class="ckkb-params">(Parameters {"; ".join(bits)}.)</span>'
    return text


@cache
def static_metadata() -> dict[str, Any]:
    """metadata.yaml (package data: read once per process)."""
    text = resources.files("ckkb.web").joinpath("metadata.yaml").read_text()
    return yaml.safe_load(text) or {}


def table_metadata(static: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-table metadata: schema docs, default facets, then the yaml's per-table extras."""
    facet_cols = list(static.get("facet_columns", []))
    max_facets = int(static.get("max_facets", 4))
    extras = static.get("tables", {}) or {}
    out: dict[str, dict[str, Any]] = {}
    for t in TABLES.values():
        names = t.column_names()
        meta: dict[str, Any] = {
            "description": f"{t.doc} ({t.kind} table)",
            "columns": {c.name: c.doc + (" (JSON)" if c.json else "") for c in t.columns if c.doc},
        }
        facets = [c for c in facet_cols if c in names][:max_facets]
        if facets:
            meta["facets"] = facets
        extra = dict(extras.get(t.name, {}) or {})
        if "facets" in extra:  # a column name, or {facet type: column name}
            extra["facets"] = [
                c
                for c in extra["facets"]
                if (next(iter(c.values())) if isinstance(c, dict) else c) in names
            ]
        if extra.get("label_column") and extra["label_column"] not in names:
            extra.pop("label_column")
        if extra.get("sort") and extra["sort"] not in names:
            extra.pop("sort")
        meta.update(extra)
        out[t.name] = meta
    return out


def query_metadata() -> dict[str, dict[str, Any]]:
    """Datasette's `queries` entries for every canned query file."""
    queries = {}
    for q in canned_queries().values():
        # hide_sql: the page opens on the form and the rows; "Show SQL" is one click away.
        entry: dict[str, Any] = {
            "sql": served_sql(q),
            "title": q.title,
            "params": list(q.params),
            "hide_sql": True,
        }
        if q.description:
            entry["description_html"] = description_html(q)
        queries[q.name] = entry
    return queries


def build_metadata(db_name: str) -> dict[str, Any]:
    """The whole metadata dict for a knowledge base served under the name `db_name`."""
    static = static_metadata()
    queries = query_metadata()
    db_meta = {
        "description": f"ckkb knowledge base (schema version {SCHEMA_VERSION}), read-only.",
        "tables": table_metadata(static),
        "queries": queries,
    }
    meta = {
        k: v
        for k, v in static.items()
        if k
        in (
            "title",
            "description",
            "description_html",
            "about",
            "about_url",
            "license",
            "license_url",
            "source",
            "source_url",
        )
    }
    meta["databases"] = {db_name: db_meta}
    return meta
