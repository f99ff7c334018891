"""Stage `ck.archs`: the GPU targets a CK tree knows, read from the tree itself.

A target is known when the tree names it: in its top-level CMakeLists.txt, the CMakeLists.txt of
an instance library root that CMake reaches (`instance_roots`: CK's gpu/, a fork's) or of a
directory on the way to one (CK's library/): target lists such as
`set(CK_GPU_TARGETS "gfx908;gfx90a;...")`, checks such as `MATCHES "gfx942"`, fixed
`--offload-arch=gfx90a` flags; in a `.cmake` file one of those include()s (as CMake follows
include(): `ckkb.extract.cmake_includes`); or in a `defined(__gfxNNN__)` list of
include/ck/ck.hpp. A fork's
own targets are therefore known as soon as it names them. Family macros (`__gfx9__`,
`__gfx94__`, `__gfx11__`, ...) are whatever ck.hpp `#define`s under an `#if` on the targets,
evaluated per target in file order; a name such as `gfx94` that only a family pattern uses is
not a target.

Per-arch availability is computed ("evaluated") for the targets the top-level CMakeLists.txt
names (its target lists and checks, the files it include()s among them): those a build of the
tree can be asked for. A small tree
whose top CMakeLists.txt names no target (a hand-written fixture) falls back to
ckkb.archs.ARCHS, so that it still answers for the usual eight.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ckkb.archs import ARCHS
from ckkb.extract.availability import evaluate
from ckkb.extract.cmake_includes import SUFFIX, included_by, module_files
from ckkb.extract.conditions import directive_expr, directive_stacks
from ckkb.extract.instance_roots import instance_roots
from ckkb.kb.schema.ck_archs import TreeArchRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult
from ckkb.lang.cmake.syntax import CMakeSyntaxError, parse_cmake

CK_HPP = "include/ck/ck.hpp"
TOP_CMAKE = "CMakeLists.txt"
# A concrete target: gfx + three characters for gfx6..gfx9 (gfx908, gfx90a, gfx940), four digits
# from gfx10 on (gfx1030, gfx1100). gfx9, gfx94, gfx101, gfx11 are family patterns.
_ARCH = r"gfx(?:[6-9][0-9][0-9a-f]|1[0-9]{3})"
_CMAKE_ARCH = re.compile(rf"(?<![\w-])({_ARCH})(?![0-9a-zA-Z_])")
_HEADER_ARCH = re.compile(rf"\b__({_ARCH})__\b")
_FAMILY_DEFINE = re.compile(rb"^\s*#\s*define\s+(__gfx\w+__)\s*$", re.M)
_INCLUDE = re.compile(r"\binclude\s*\(", re.I)  # a CMake file that may include() another


def arch_order(arch: str) -> tuple[int, str]:
    """gfx908 < gfx90a < gfx942 < gfx1030 < gfx1100: by generation, then name."""
    return (len(arch), arch)


class ArchsStage:
    name = "ck.archs"
    version = "3"
    tree = "ck"
    reads = ()
    writes = ("tree_archs",)
    combine_cost = 0.01

    def files(self, root: Path) -> list[Path]:
        found = instance_roots(root)
        dirs = ["", *dict.fromkeys(d for via in found.chain for d in via), *found.roots]
        rels = (*cmake_files(root), CK_HPP, *module_files(root, dirs, found.roots))
        return [root / f for f in dict.fromkeys(rels) if (root / f).is_file()]

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        text = data.decode("utf-8", errors="replace")
        named: list[tuple[str, int]] = []
        pattern = _HEADER_ARCH if rel == CK_HPP else _CMAKE_ARCH
        for no, ln in enumerate(text.splitlines(), start=1):
            if rel != CK_HPP and ln.lstrip().startswith("#"):
                continue  # a CMake comment names nothing the build uses
            named.extend((m.group(1), no) for m in pattern.finditer(ln))
        facts: dict[str, Any] = {"named": named}
        if rel == CK_HPP:
            facts["families"] = _family_defines(data)
        elif rel.endswith(SUFFIX) or _INCLUDE.search(text):  # include()s followed in combine
            try:
                facts["stmts"] = parse_cmake(text)[0]
            except CMakeSyntaxError:
                pass
        return FileResult(facts=facts)

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        first: dict[str, tuple[str, int, str]] = {}
        cmakes = cmake_files(root)
        # each CMake file read, then the files its run include()s (what they name counts there)
        runs = included_by(root, results, list(cmakes))
        order = [f for rel in cmakes for f in (rel, *runs.get(rel, ()))]
        for rel in (*order, CK_HPP):
            fr = results.get(rel)
            for arch, line in fr.facts.get("named", []) if fr else []:
                first.setdefault(arch, (rel, line, "header" if rel == CK_HPP else "cmake"))
        top_files = (TOP_CMAKE, *runs.get(TOP_CMAKE, ()))
        evaluated = {
            a for rel in top_files if (fr := results.get(rel)) for a, _ in fr.facts.get("named", [])
        } or set(ARCHS)
        for a in evaluated - set(first):
            first[a] = ("", 0, "default")
        hpp = results.get(CK_HPP)
        fams = hpp.facts.get("families", []) if hpp else []
        rows = [
            TreeArchRow(
                arch=a,
                file=f,
                line=ln,
                source=src,
                families=families_of(a, fams),
                evaluated=a in evaluated,
            )
            for a, (f, ln, src) in sorted(first.items(), key=lambda kv: arch_order(kv[0]))
        ]
        return StageResult(rows=rows)


def cmake_files(root: Path) -> tuple[str, ...]:
    """The CMake files whose target names count, in the order that picks the file naming an arch:
    the top CMakeLists.txt, each instance root's, then those on the way to them (CK's
    library/CMakeLists.txt)."""
    found = instance_roots(root)
    via = dict.fromkeys(f"{d}/{TOP_CMAKE}" for steps in found.chain for d in steps)
    return (TOP_CMAKE, *(f"{r}/{TOP_CMAKE}" for r in found.roots), *via)


def _family_defines(data: bytes) -> list[tuple[str, str, int]]:
    """(macro, the #if it sits under, line) for every `#define __gfxX__` in ck.hpp."""
    stacks = directive_stacks(data)
    out = []
    for m in _FAMILY_DEFINE.finditer(data):
        no = data.count(b"\n", 0, m.start()) + 1
        stack = stacks[no] if no < len(stacks) else ()
        if stack and stack[-1][2] == 0:
            out.append((m.group(1).decode(), stack[-1][1], no))
    return out


def families_of(arch: str, fams: list[Any]) -> list[str]:
    """The family macros ck.hpp defines on arch's device pass, evaluated in file order."""
    defines = {f"__{arch}__": "1", "__HIP_DEVICE_COMPILE__": "1"}
    out: list[str] = []
    for macro, cond, _line in fams:
        if evaluate(directive_expr(cond), arch, defines, {}):
            defines[macro] = "1"
            out.append(macro)
    return out


STAGE = ArchsStage()
