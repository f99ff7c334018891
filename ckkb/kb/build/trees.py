"""Which trees a `ckkb build` builds: the ones the database holds, changed by the command line.

Adding a tree keeps the others (their unchanged rows are copied, see `reuse`); `--drop NAME`
removes one; a tree given again by path or by name is refreshed in place, keeping its source id.
With no tree arguments a new database gets the wheel's trees and an existing one is refreshed.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from ckkb import sources
from ckkb.errors import CkkbError
from ckkb.sources import NamedTree

TreeArg = tuple[str, str | None, str]  # kind, name (None: the default), path


class TreeChoiceError(CkkbError):
    """Tree arguments that contradict each other or the database."""


def stored(db_path: Path) -> list[tuple[str, str | None, str]]:
    """(kind, name, path) of each tree the database holds, in source-id order."""
    if not db_path.is_file():
        return []
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            cols = {r[1] for r in conn.execute("pragma table_info(sources)")}
            name = "name" if "name" in cols else "null"
            rows = conn.execute(
                f"select kind, {name}, path from sources where kind in ('ck', 'aiter') order by id"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return []  # not a knowledge base: the build itself refuses it, with the reason
    return [(r[0], r[1], r[2]) for r in rows]


def resolve(kind: str, path: str | None, name: str | None = None) -> NamedTree:
    """A tree argument (or a stored tree) as a named tree; the wheel's trees are found as such."""
    if kind == "ck":
        return sources.named_tree(sources.ck_tree(path), name)
    if path is not None:
        try:
            wheel = sources.default_aiter_tree()
        except CkkbError:
            wheel = None
        if wheel is not None and Path(path).resolve() == wheel.root.resolve():
            return sources.named_tree(wheel, name)
    return sources.named_tree(sources.aiter_tree(path), name)


def merged(
    db_path: Path,
    given: list[TreeArg],
    *,
    no_aiter: bool = False,
    drop: tuple[str, ...] = (),
) -> list[NamedTree]:
    """The trees to build into db_path: those it holds, with `given` added or refreshed."""
    held = stored(db_path)
    unknown = [d for d in drop if d not in {n for _, n, _ in held}]
    if unknown:
        known = ", ".join(n or "?" for _, n, _ in held) or "none"
        raise TreeChoiceError(f"--drop {unknown[0]}: no such tree in {db_path} (it holds: {known})")
    trees: list[NamedTree] = []
    for kind, name, path in held:
        if name in drop or (no_aiter and kind == "aiter"):
            continue
        if not Path(path).exists():
            raise TreeChoiceError(
                f"tree {name or path} ({kind}): {path} no longer exists",
                hint=f"pass --drop {name} to remove it, or --{kind} {name}=NEWPATH",
            )
        trees.append(resolve(kind, path, name))
    if not held:  # a new database: the wheel's tree of each kind not given
        kinds = {k for k, _, _ in given}
        defaults = [("ck", None, None)] if "ck" not in kinds else []
        if "aiter" not in kinds and not no_aiter:
            defaults.append(("aiter", None, None))
        trees = [resolve(k, p, n) for k, n, p in defaults]
    for kind, name, path in given:
        if kind == "aiter" and no_aiter:
            raise TreeChoiceError("--aiter and --no-aiter contradict each other")
        _add(trees, resolve(kind, path, name), explicit=name is not None)
    kind_order = {"aiter": 0, "ck": 1}
    if not held:  # source ids as a single-tree build numbers them: by kind
        trees.sort(key=lambda t: kind_order.get(t.kind, 2))
    return trees


def _add(trees: list[NamedTree], new: NamedTree, *, explicit: bool) -> None:
    """Refresh the tree of that name, or of that path and kind, in place; else append it."""
    for i, t in enumerate(trees):
        same_name = explicit and t.name == new.name
        same_path = t.kind == new.kind and str(t.root) == str(new.root)
        if same_name and t.kind != new.kind:
            raise TreeChoiceError(f"tree {new.name} is a {t.kind} tree, not a {new.kind} tree")
        if same_name or same_path:
            trees[i] = new if explicit else replace(new, name=t.name)
            return
    name, n = new.name, 2
    while name in {t.name for t in trees}:
        name, n = f"{new.name}-{n}", n + 1
    trees.append(replace(new, name=name))
