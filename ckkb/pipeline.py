"""Every stage a `ckkb build` runs: the extractors of each input kind, then the aiter audit.

This module sits above `extract` and `audit` and only lists them; the build derives the order
from what each stage reads and writes (`ckkb.kb.stages.build_order`).
"""

from __future__ import annotations

import importlib

from ckkb.errors import CkkbError
from ckkb.kb.stages import Stage

# Modules whose attribute STAGE (one Stage) or STAGES (a list) defines stages. Order here is only
# the tie-break among stages that are ready together.
STAGE_MODULES: tuple[str, ...] = (
    "ckkb.extract.templates",
    "ckkb.extract.instances",
    "ckkb.extract.archs_stage",
    "ckkb.extract.cmake",
    "ckkb.extract.instance_gates",
    "ckkb.extract.registrations",
    "ckkb.extract.typestrings",
    "ckkb.extract.aiter",
    "ckkb.audit.stage",
    "ckkb.extract.factories",
    "ckkb.extract.profiler",
)


class StageLoadError(CkkbError):
    """A stage module that does not import: the build would silently lose its tables."""

    exit_code = 1


def stages() -> list[Stage]:
    """Every stage of every module in STAGE_MODULES; a module that fails to load is an error."""
    out: list[Stage] = []
    for mod in STAGE_MODULES:
        try:
            module = importlib.import_module(mod)
        except Exception as e:  # any import failure: name the module, never build without it
            raise StageLoadError(
                f"stage module {mod} failed to load: {type(e).__name__}: {e}",
                hint="reinstall ckkb (pip install .) or report the bug",
            ) from e
        out.extend(getattr(module, "STAGES", None) or [module.STAGE])
    return out
