"""Which tree's name schemas read a printed name.

Each CK release prints its own formats, so a name is read against the schemas of the tree it came
from: the one the user names (`--tree`), or else, name by name, the first tree (in build order)
whose schemas read it exactly (a schema's whole format matched: every printed value under its
parameter name, no generic fallback), falling back to the first tree's reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckkb.kb import trees
from ckkb.names import ParsedName, SchemaSet, load_schemas, parse


@dataclass(frozen=True)
class SchemaTree:
    """One CK tree of the knowledge base and its name schemas."""

    name: str
    source_id: int
    schemas: SchemaSet = field(compare=False)


def schema_trees(db: Any, tree: str | None = None) -> list[SchemaTree]:
    """The CK trees whose schemas read names, each with its schemas: the one `tree` names, or
    every CK tree in build order when `tree` is None or names a tree of another kind. Raises
    ckkb.kb.trees.UnknownTree (naming the trees held) when no tree is named `tree`."""
    held = trees.list_trees(db.conn) if "sources" in db.table_names() else []
    if tree is not None:
        ck = trees.choose(held, tree).get("ck")
        if ck is not None and ck.name == tree:
            held = [ck]
    return [SchemaTree(t.name, t.rows, load_schemas(db, t.rows)) for t in held if t.kind == "ck"]


class NameReader:
    """Reads printed names against trees' schemas: one tree's when it is the only one given, else
    per name the first tree whose schemas read it exactly (ParsedName.schema == "matched"), else
    the first tree's reading. With no trees the grammar alone reads (tree None)."""

    def __init__(self, schema_trees: list[SchemaTree]) -> None:
        self.trees = schema_trees

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
