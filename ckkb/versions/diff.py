"""`ckkb diff FROM TO`: what changed between two trees of one knowledge base.

Two CK trees: instances (ck_instances), gates, registering calls and ckProfiler ops (ck_parts),
each tree read through its own scoped connection (ckkb.kb.trees). Two aiter trees: the kernel
lists and tuned configs, by ckkb.versions.aiter_diff (shared with `ckkb review`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckkb.errors import CkkbError
from ckkb.kb import trees as kb_trees
from ckkb.kb.db import open_db
from ckkb.queries.ck import known_archs
from ckkb.versions import ck_instances, ck_parts
from ckkb.vocabulary import LAYOUTS
from ckkb.vocabulary import dtype as dtype_of


class DiffError(CkkbError):
    """Two trees that cannot be compared, or a filter that names nothing."""


def diff(
    path: str | Path,
    from_name: str,
    to_name: str,
    *,
    archs: Sequence[str] = (),
    dir: str | None = None,
    dtype: str | None = None,
    layout: str | None = None,
) -> dict[str, Any]:
    """The `ckkb diff` answer: {"from", "to", "archs", "instances", "gates", "registrations",
    "profiler_ops"} for two CK trees; {"from", "to", "kind": "aiter", ...aiter_diff} for two
    aiter trees."""
    db = open_db(path, readonly=True)
    try:
        held = kb_trees.list_trees(db.conn)
    finally:
        db.close()
    old, new = _tree(held, from_name), _tree(held, to_name)
    if old.kind != new.kind:
        raise DiffError(
            f"cannot compare {old.name} ({old.kind} tree) with {new.name} ({new.kind} tree)",
            hint="ckkb diff compares two CK trees or two aiter trees: `ckkb trees` lists them",
        )
    if old.kind == "aiter":
        if archs or dir or dtype or layout:
            raise DiffError("--arch, --dir, --dtype and --layout filter CK trees only")
        return _aiter(path, old.name, new.name)
    return _ck(path, old.name, new.name, list(archs), dir or "", dtype or "", layout or "")


def _tree(held: list[kb_trees.TreeInfo], name: str) -> kb_trees.TreeInfo:
    """The tree of that name; else UnknownTree, naming the trees held."""
    return kb_trees.choose(held, name)[next((t.kind for t in held if t.name == name), "ck")]


def _aiter(path: str | Path, from_name: str, to_name: str) -> dict[str, Any]:
    from ckkb.versions.aiter_diff import aiter_diff  # lazily: a CK diff never reads the audit

    old = open_db(path, readonly=True, tree=from_name)
    new = open_db(path, readonly=True, tree=to_name)
    try:
        found = aiter_diff(old.conn, new.conn)
    finally:
        old.close()
        new.close()
    # "from"/"to" stay the tree names, as between CK trees; aiter_diff's account of each tree
    # (name, path, version, commit) moves under "trees"
    trees = {"from": found.pop("from"), "to": found.pop("to")}
    return {"from": from_name, "to": to_name, "kind": "aiter", "trees": trees, **found}


def _ck(
    path: str | Path,
    from_name: str,
    to_name: str,
    archs: list[str],
    dir: str,
    dtype: str,
    layout: str,
) -> dict[str, Any]:
    ctype = ""
    if dtype:
        d = dtype_of(dtype)
        if d is None:
            raise DiffError(f"unknown --dtype {dtype!r}", hint="e.g. bf16, f16, f32, f8, i8")
        ctype = d.cpp
    if layout and layout not in LAYOUTS:
        raise DiffError(f"unknown --layout {layout!r}", hint=f"one of: {', '.join(LAYOUTS)}")
    old = open_db(path, readonly=True, tree=from_name)
    new = open_db(path, readonly=True, tree=to_name)
    try:
        (old_known, old_built), (new_known, new_built) = known_archs(old), known_archs(new)
        union = sorted(set(old_known) | set(new_known), key=lambda a: (len(a), a))
        for a in archs:
            if a not in union:
                raise DiffError(
                    f"unknown arch {a!r}: neither {from_name} nor {to_name} knows it; "
                    f"they know {', '.join(union)}",
                    hint="the archs each tree names: ckkb archs --tree NAME",
                )
        chosen = list(dict.fromkeys(archs)) or union
        compared = [a for a in chosen if a in old_built and a in new_built]
        found = ck_instances.instances(
            (old, old_built), (new, new_built), (from_name, to_name), chosen, dir, ctype, layout
        )
        regs, functions = ck_parts.registrations(
            old.conn, new.conn, {"dir": dir, "dtype": ctype, "layout": layout}
        )
        gates = ck_parts.gates(
            old.conn, new.conn, dir, archs or None, functions if (dtype or layout) else None
        )
        ops = ck_parts.profiler_ops(old.conn, new.conn)
    finally:
        old.close()
        new.close()
    return {
        "from": from_name,
        "to": to_name,
        "archs": [
            {
                "arch": a,
                "from": a in old_known,
                "to": a in new_known,
                "compared": a in compared,
            }
            for a in chosen
        ],
        "instances": found,
        "gates": gates,
        "registrations": regs,
        "profiler_ops": ops,
    }
