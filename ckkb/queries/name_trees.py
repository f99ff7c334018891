"""Which tree's name schemas read a printed name.

Each CK release prints its own formats, so a name is read against the schemas of the tree it came
from: the one the user names (`--tree`), or else, name by name, the first tree (in build order)
whose schemas read it exactly (a schema's whole format matched: every printed value under its
parameter name, no generic fallback), falling back to the first tree's reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb.errors import CkkbError
from ckkb.names import ParsedName, SchemaSet, load_schemas, parse
from ckkb.queries import lookup


@dataclass(frozen=True)
class SchemaTree:
    """One CK tree of the knowledge base and its name schemas."""

    name: str
    source_id: int
    schemas: SchemaSet = field(compare=False)


def ck_trees(db: Any) -> list[tuple[str, int]]:
    """(name, source_id) of every CK tree of the knowledge base, in build order.

    Stands in for ckkb.kb.trees.list_trees until it lands: a tree is named by its version (its
    directory name when it has none)."""
    if "sources" not in db.table_names():
        return []
    out: list[tuple[str, int]] = []
    for r in db.query(lookup("ck_sources")):
        name = r["version"] or Path(r["path"] or "").name or f"ck{r['id']}"
        if any(n == name for n, _ in out):
            name = f"{name}#{r['id']}"
        out.append((name, int(r["id"])))
    return out


def schema_trees(db: Any, tree: str | None = None) -> list[SchemaTree]:
    """The named CK tree, or (tree None) every CK tree in build order, each with its schemas.
    Raises CkkbError naming the known trees when `tree` is not one of them."""
    known = ck_trees(db)
    if tree is not None:
        hit = [(n, sid) for n, sid in known if n == tree]
        if not hit:
            names = ", ".join(n for n, _ in known) or "none (build one with `ckkb build`)"
            raise CkkbError(
                f"unknown tree {tree!r}", hint=f"CK trees of this knowledge base: {names}"
            )
        known = hit
    return [SchemaTree(n, sid, load_schemas(db, sid)) for n, sid in known]


class NameReader:
    """Reads printed names against trees' schemas: one tree's when it is the only one given, else
    per name the first tree whose schemas read it exactly (ParsedName.schema == "matched"), else
    the first tree's reading. With no trees the grammar alone reads (tree None)."""

    def __init__(self, trees: list[SchemaTree]) -> None:
        self.trees = trees

    @classmethod
    def of(cls, db: Any, tree: str | None = None) -> NameReader:
        return cls(schema_trees(db, tree))

    def read(self, name: str) -> tuple[ParsedName, str | None]:
        """(the reading, the name of the tree that read it)."""
        first: tuple[ParsedName, str | None] | None = None
        for t in self.trees:
            p = parse(name, t.schemas)
            if p.schema == "matched":
                return p, t.name
            if first is None:
                first = (p, t.name)
        return first if first is not None else (parse(name, None), None)
