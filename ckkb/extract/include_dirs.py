"""Where a CK tree's `#include "..."` paths point, read from the tree's own CMake.

The include directories are those CMake gives the instance sources: `include_directories(...)`
and `target_include_directories(...)` in the top CMakeLists.txt, in the files on the way to each
instance library root (CK's `library/CMakeLists.txt`), in each root's and in its directories',
evaluated with the CMake interpreter (their `if()`s, variables and the `include()`s they make),
`${PROJECT_SOURCE_DIR}` and kin being the tree's path. A directory outside the tree (the build
directory, HIP's) holds no source to read and is left out; `$<BUILD_INTERFACE:d>` is `d`, other
generator expressions (`$<INSTALL_INTERFACE:...>`) give nothing to a build.

The factory headers are where `#include "ck/library/tensor_operation_instance/gpu/..."` (the
path CK's sources and users spell) resolves against those directories: a fork that moves
`library/include/` keeps its factories as long as its CMake says where they are. A tree whose
CMake gives no include directory (a small hand-written tree) falls back to CK's own two,
`include` and `library/include`: `from_cmake` says which happened.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from ckkb.extract.cmake_includes import Modules
from ckkb.extract.files import tree_files
from ckkb.extract.instance_roots import instance_roots
from ckkb.extract.kept import kept
from ckkb.kb.stages import per_build
from ckkb.lang.cmake.interpreter import Break, Interpreter
from ckkb.lang.cmake.syntax import CMakeSyntaxError, Command, parse_cmake
from ckkb.sources import CK_FACTORY_INCLUDE

CMAKE = "CMakeLists.txt"
CONVENTIONAL = ("include", "library/include")  # CK's, for a tree whose CMake names none
_COMMANDS = ("include_directories", "target_include_directories")
_KEYWORDS = frozenset(("BEFORE", "AFTER", "SYSTEM", "PUBLIC", "PRIVATE", "INTERFACE"))
_GENEX = re.compile(r"\$<([A-Z_]+):([^>]*)>")
_BINARY = "/\0binary"  # PROJECT_BINARY_DIR and kin: never a directory of the tree


@dataclass(frozen=True)
class IncludeDirs:
    dirs: tuple[str, ...]  # '/'-separated, relative to the tree's root, in CMake's order
    from_cmake: bool


class _Reader(Interpreter):
    """The interpreter, collecting the directories the include commands name."""

    def __init__(self, env: dict[str, str], file: str, load: Modules) -> None:
        super().__init__(env, file, load=load)
        self.found: list[str] = []

    def command(self, c: Command) -> None:
        if c.name in _COMMANDS:
            words = self.command_words(c)
            if c.name == "target_include_directories":
                words = words[1:]
            here = posixpath.join(self.env["PROJECT_SOURCE_DIR"], posixpath.dirname(self.file))
            for w in words:
                for d in _paths(w):
                    self.found.append(posixpath.normpath(posixpath.join(here, d)))
            return
        super().command(c)


def _paths(word: str) -> list[str]:
    """The directories one evaluated word names (generator expressions read as a build does)."""
    if word in _KEYWORDS or not word:
        return []
    if "$<" not in word:
        return [word]
    out: list[str] = []
    for kind, value in _GENEX.findall(word):
        if kind == "BUILD_INTERFACE":
            out.extend(v for v in value.split(";") if v)
    return out


def _files(root: Path) -> list[str]:
    """The CMake files read, top first: the top, those on the way to each root, each root's,
    then its directories'."""
    found = instance_roots(root)
    out = [CMAKE, *dict.fromkeys(f"{d}/{CMAKE}" for via in found.chain for d in via)]
    for r in found.roots:
        out.append(f"{r}/{CMAKE}")
        try:
            subdirs = sorted(e.name for e in os.scandir(root / r) if e.is_dir())
        except OSError:
            continue
        out.extend(f"{r}/{d}/{CMAKE}" for d in subdirs)
    return out


@per_build  # the factories and instances stages list their files by it: one read per build
def include_dirs(root: Path) -> IncludeDirs:
    """The tree's include directories (see the module docstring); in a build, kept in the
    build's cache while the files read are unchanged (`kept`)."""
    root = Path(root)
    files = _files(root)
    found = kept("include_dirs/1", root, lambda: _read(root, files), given=files)
    prefix = os.path.abspath(root) + "/"
    dirs = [d[len(prefix) :] for d in found if d.startswith(prefix)]
    dirs += ["" for d in found if d + "/" == prefix]
    dirs = [d for d in dict.fromkeys(dirs) if (root / d).is_dir()]
    if dirs:
        return IncludeDirs(tuple(dirs), True)
    return IncludeDirs(tuple(d for d in CONVENTIONAL if (root / d).is_dir()), False)


def _read(root: Path, files: list[str]) -> tuple[list[str], list[str]]:
    """(the absolute directories the include commands of `files` name, the files read: those
    and the files their include()s read)."""
    top = os.path.abspath(root)
    load = Modules(root, {})
    env = {
        "PROJECT_SOURCE_DIR": top,
        "CMAKE_SOURCE_DIR": top,
        "PROJECT_BINARY_DIR": _BINARY,
        "CMAKE_BINARY_DIR": _BINARY,
        "CMAKE_CURRENT_BINARY_DIR": _BINARY,
    }
    found: list[str] = []
    for i, rel in enumerate(files):
        try:
            text = (root / rel).read_text(errors="replace")
        except OSError:
            continue
        # the top file runs whole (its variables reach the others); the rest only when they
        # name an include directory
        if i > 0 and "include_directories" not in text:
            continue
        try:
            stmts = parse_cmake(text)[0]
        except CMakeSyntaxError:
            continue
        it = _Reader(
            dict(env, CMAKE_CURRENT_SOURCE_DIR=posixpath.dirname(f"{top}/{rel}")), rel, load
        )
        try:
            it.run(stmts)
        except (Break, RecursionError):
            pass
        if i == 0:
            env = dict(it.env)
        found.extend(it.found)
    return found, [*files, *load.read]


def factory_dirs(root: Path) -> tuple[str, ...]:
    """The directories `#include "ck/library/tensor_operation_instance/gpu/..."` resolves to,
    in include order: CK's `library/include/ck/library/tensor_operation_instance/gpu`."""
    out = []
    for d in include_dirs(root).dirs:
        cand = posixpath.join(d, CK_FACTORY_INCLUDE) if d else CK_FACTORY_INCLUDE
        if (Path(root) / cand).is_dir():
            out.append(cand)
    return tuple(out)


def factory_files(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The files under the factory directories, a path found in an earlier one winning (the
    file `#include` reaches)."""
    seen: set[str] = set()
    out: list[Path] = []
    for d in factory_dirs(root):
        base = os.path.join(root, d)
        for rel in tree_files(base):
            if rel.endswith(suffixes) and rel not in seen:
                seen.add(rel)
                out.append(Path(base) / rel)
    return out


def is_factory_header(rel: str) -> bool:
    """Whether `rel` lies right in a factory directory (where the include path puts it)."""
    parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
    return parent == CK_FACTORY_INCLUDE or parent.endswith("/" + CK_FACTORY_INCLUDE)
