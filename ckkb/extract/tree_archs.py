"""What later stages read of `tree_archs` (written by ck.archs): the archs to evaluate and each
one's device-pass macros. Apart from the stage so that availability can import it."""

from __future__ import annotations

from ckkb.archs import ARCHS
from ckkb.kb.stages import BuildContext


def tree_archs(ctx: BuildContext) -> tuple[str, ...]:
    """The archs availability is computed for, in order (ARCHS when the stage did not run)."""
    rows = [r for r in ctx.table_rows("tree_archs") if r.evaluated]
    return tuple(r.arch for r in rows) or ARCHS


def device_defines(ctx: BuildContext) -> dict[str, dict[str, str]]:
    """arch -> the macros its device pass defines: __gfxNNN__ and the tree's family macros."""
    out: dict[str, dict[str, str]] = {}
    for r in ctx.table_rows("tree_archs"):
        d = {f"__{r.arch}__": "1", "__HIP_DEVICE_COMPILE__": "1"}
        d.update(dict.fromkeys(r.families or [], "1"))
        out[r.arch] = d
    return out
