"""The extraction stages a build runs, in order. Each extractor module contributes one Stage.

A stage is pure: `files` lists its inputs, `extract` turns one file's bytes into rows (runs in a
worker process and is cached by content hash), `combine` resolves across files (runs once, in
the parent, with the rows of earlier stages in `ctx`). Stages never open the database.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ckkb.diagnostics import Diagnostic


@dataclass
class FileResult:
    """What one file yields: rows for the database, diagnostics, and facts kept for `combine` only."""

    rows: list[Any] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageResult:
    rows: list[Any] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


@dataclass
class BuildContext:
    """Shared state of one build: the trees and the rows each finished stage produced, by table."""

    trees: dict[str, Any]  # "ck" -> CkTree, "aiter" -> AiterTree (absent when not built)
    rows: dict[str, list[Any]] = field(default_factory=dict)

    def table_rows(self, table: str) -> list[Any]:
        return self.rows.get(table, [])


class Stage(Protocol):
    name: str  # unique, e.g. "ck.instances"
    version: str  # bump to invalidate cached per-file results
    tree: str  # "ck" | "aiter"
    # Optional `extract_with`: the name of an earlier stage that parses the same bytes of the files
    # both read; the build extracts such a file for both stages in one worker task (one parse).
    # Optional `worker_group`: consecutive files of stages with the same group go to one worker (for
    # a costly per-process setup such as an import).

    def files(self, root: Path) -> list[Path]: ...

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult: ...

    def combine(
        self, root: Path, results: dict[str, FileResult], ctx: BuildContext
    ) -> StageResult: ...


# Module paths whose attribute STAGE (one Stage) or STAGES (a list) defines stages, in build order. A module that is not written yet
# (or fails to import) is reported, not silently skipped.
#
# The order is the order files are extracted in and stages are combined in (a stage's combine may
# read the rows of any stage before it: instances need templates' device ops; registrations need
# instance lists and cmake's build rules; typestrings and the aiter audit need instances and
# registrations). Stages whose combine is heavy come first, so the parent combines them while the
# workers still extract; stages nothing depends on and whose combine only collects rows (factories,
# profiler) come last, so the build does not end with one core combining and the other idle.
STAGE_MODULES: tuple[str, ...] = (
    "ckkb.extract.templates",
    "ckkb.extract.instances",
    "ckkb.extract.cmake",
    "ckkb.extract.registrations",
    "ckkb.extract.typestrings",
    "ckkb.extract.aiter",
    "ckkb.extract.factories",
    "ckkb.extract.profiler",
)

_cache: dict[str, Stage] = {}


def load_stages() -> list[Stage]:
    stages = []
    for mod in STAGE_MODULES:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name == mod:
                continue  # that extractor does not exist in this version
            raise
        for stage in getattr(module, "STAGES", None) or [module.STAGE]:
            _cache[stage.name] = stage
            stages.append(stage)
    return stages


def register_stage(stage: Stage) -> None:
    """Make a stage findable by name in this process (and in forked workers)."""
    _cache[stage.name] = stage


def get_stage(name: str) -> Stage:
    if name not in _cache:
        load_stages()
    return _cache[name]
