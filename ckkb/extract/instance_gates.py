"""Stage `ck.instance_gates`: list entries an `#if` on arch macros drops on an arch.

An instance list may hold `#ifdef __gfx94__ ... #endif` around some of its entries (CK 2024-10's
f8 universal GEMM lists). The entry is compiled only where the device pass defines the macro,
so it exists on gfx94x and nowhere else, whatever the registrations say. The guard the instance
reader stored (`instances.guard`) is evaluated per arch when it names an arch macro or family
(`__gfx...__`), with what that arch's build defines: the tree's CMake `-D` macros
(`build_defines`), the unconditional `#define`s of include/ck/ck.hpp, and the device-pass macros
of ck.archs (`__gfxNNN__` and the tree's family macros). Guards on data-type switches alone
(`CK_ENABLE_FP8`, ...) are the same on every arch and are left to the other layers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ckkb.extract.archs_stage import CK_HPP
from ckkb.extract.availability import DEFAULT_BUILD_DEFINES, evaluate
from ckkb.extract.conditions import directive_expr, directive_stacks
from ckkb.extract.registration_files import extract_defines
from ckkb.extract.tree_archs import device_defines, tree_archs
from ckkb.kb.schema.ck_archs import InstanceGateRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult


class InstanceGatesStage:
    name = "ck.instance_gates"
    version = "2"
    tree = "ck"
    reads = ("instances", "tree_archs", "build_defines")
    writes = ("instance_gates",)
    combine_cost = 0.05

    def files(self, root: Path) -> list[Path]:
        return [root / CK_HPP] if (root / CK_HPP).is_file() else []

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        return extract_defines(rel, data)

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        hpp = results.get(CK_HPP)
        ck_defines = {k: v for k, (v, _l) in (hpp.facts.get("defines", {}) if hpp else {}).items()}
        build: dict[str, dict[str, str]] = {}
        for r in ctx.table_rows("build_defines"):
            build.setdefault(r.arch, {})[r.name] = r.value
        device = device_defines(ctx)
        archs = tree_archs(ctx)
        defines = {}
        for a in archs:
            d = dict(ck_defines)
            d.update(build.get(a) or dict.fromkeys(DEFAULT_BUILD_DEFINES, "1"))
            d.update(device.get(a) or {f"__{a}__": "1"})
            defines[a] = d
        rows: list[InstanceGateRow] = []
        verdicts: dict[str, list[str]] = {}  # guard -> archs it drops the entry on
        stacks: dict[str, list[Any]] = {}  # list file -> its directive stacks
        for inst in ctx.table_rows("instances"):
            guard = inst.guard or ""
            if "__gfx" not in guard:
                continue
            if guard not in verdicts:
                expr = directive_expr(f"#if {guard}")
                verdicts[guard] = [a for a in archs if evaluate(expr, a, defines[a], {}) == 0]
            if not verdicts[guard]:
                continue
            line = _guard_line(root, inst.file, inst.line, stacks)
            rows.extend(
                InstanceGateRow(
                    instance_id=inst.id,
                    arch=a,
                    file=inst.file,
                    line=line,
                    condition=f"#if {guard}",
                )
                for a in verdicts[guard]
            )
        return StageResult(rows=rows)


def _guard_line(root: Path, rel: str, line: int, stacks: dict[str, list[Any]]) -> int:
    """Line of the innermost directive on arch macros around the entry at rel:line (the entry's
    own line when the file cannot be read again). The list file is an input of ck.instances,
    whose rows this stage reads, so a change to it reruns this stage too."""
    if rel not in stacks:
        try:
            stacks[rel] = directive_stacks((root / rel).read_bytes())
        except OSError:
            stacks[rel] = []
    st = stacks[rel]
    opened = st[line] if line < len(st) else ()
    for dline, text, _section in reversed(opened):
        if "__gfx" in text:
            return int(dline)
    return line


STAGE = InstanceGatesStage()
