"""Directories an aiter tuner puts on sys.path (`sys.path.insert(0, f"{AITER_CSRC_DIR}/x/")`),
repo-style: where its `from module import kernels_list` is found."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")

DIRS = {"AITER_CSRC_DIR": "csrc", "AITER_ROOT_DIR": "", "AITER_META_DIR": ""}


def sys_path_dir(node: cst.BaseExpression) -> str | None:
    """f"{AITER_CSRC_DIR}/x/" -> csrc/x (repo-style); None for anything else."""
    if not isinstance(node, cst.FormattedString):
        return None
    parts = []
    for p in node.parts:
        if isinstance(p, cst.FormattedStringText):
            parts.append(p.value)
        elif (
            isinstance(p, cst.FormattedStringExpression)
            and isinstance(p.expression, cst.Name)
            and p.expression.value in DIRS
        ):
            parts.append(DIRS[p.expression.value])
        else:
            return None
    return "".join(parts).strip("/")
