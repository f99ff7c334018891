"""The GPU targets a CK tree knows, and the instance-list entries a target's device pass drops.

Owned by ckkb/extract/archs_stage.py (tree_archs) and ckkb/extract/instance_gates.py
(instance_gates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckkb.kb.schema.base import col, table


@table(
    "tree_archs",
    "Every GPU target the CK tree names: its CMake target lists and checks, and the "
    "`defined(__gfxNNN__)` lists of include/ck/ck.hpp, with the first file:line naming it.",
    pk="arch",
)
@dataclass(kw_only=True, slots=True)
class TreeArchRow:
    arch: str = col("architecture, e.g. gfx942")
    file: str = col("first file naming it, relative to the CK root")
    line: int = col("line there")
    source: str = col("cmake (a CMake target list or check) | header (a defined() list)")
    families: list[Any] = col(
        "family macros the tree's ck.hpp defines on its device pass, e.g. ['__gfx9__']",
        json=True,
        default=[],
    )
    evaluated: bool = col("per-arch availability rows are computed for it", False)


@table(
    "instance_gates",
    "Per (instance, arch): an #if/#ifdef inside its list that drops the entry on that arch's "
    "device pass (only the entries dropped are stored).",
    indexes=(("instance_id",), ("arch",)),
)
@dataclass(kw_only=True, slots=True)
class InstanceGateRow:
    instance_id: int = col("instances.id")
    arch: str = col("architecture")
    file: str = col("the list's file, relative to the CK root")
    line: int = col("line of the #if/#ifdef around the entry")
    condition: str = col("the guard, as written around the entry")
