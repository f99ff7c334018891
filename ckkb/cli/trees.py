"""`ckkb trees`: the source trees a knowledge base holds, and which one queries read."""

from __future__ import annotations

import click

from ckkb import settings
from ckkb.cli.options import db_path_option, json_option
from ckkb.cli.output import console, emit_json, print_table
from ckkb.kb import trees as kb_trees
from ckkb.kb.db import open_db


@click.command("trees")
@db_path_option
@json_option
def trees_cmd(db_path: str | None, as_json: bool) -> None:
    """The CK and aiter trees in the knowledge base. Every query command takes --tree NAME; the
    default is the first tree built of each kind (marked *)."""
    db = open_db(settings.db_path(db_path))
    try:
        trees = kb_trees.list_trees(db.conn)
    finally:
        db.close()
    default = {t.kind: t.name for t in reversed(trees)}
    if as_json:
        emit_json(
            {
                "trees": [
                    {
                        "name": t.name,
                        "kind": t.kind,
                        "path": t.path,
                        "version": t.version,
                        "commit": t.commit,
                        "files": t.files,
                        "built": t.built,
                    }
                    for t in trees
                ]
            }
        )
        return
    rows = [
        [
            t.name + (" *" if default[t.kind] == t.name else ""),
            t.kind,
            t.version or "",
            (t.commit or "")[:12],
            t.files,
            t.built or "",
            t.path,
        ]
        for t in trees
    ]
    print_table(rows, ["tree", "kind", "version", "commit", "files", "built", "path"])
    if not trees:
        console.print("no trees: build the knowledge base with `ckkb build`")
    by_id = {t.id: t.name for t in trees}
    for t in trees:
        if t.rows != t.id:  # the same contents as an earlier tree: its rows are read
            same = by_id.get(t.rows, t.rows)
            console.print(f"{t.name}: the same files as {same}; reads its rows")


def register(group: click.Group) -> None:
    group.add_command(trees_cmd)
