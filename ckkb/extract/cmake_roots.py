"""An instance library root's CMakeLists.txt (CK's gpu/), run whole, once per target arch.

The file is run as CMake runs it: `file(GLOB dir_list ...)` lists the root's directories, the
directory loop reads each one's CMakeLists.txt (`file(READ)`) and decides whether to
`add_subdirectory` it, and the commands after the loop build aggregate libraries from the
instance libraries (`list(APPEND CK_DEVICE_GEMM_INSTANCES $<TARGET_OBJECTS:...>)` then
`add_library(device_gemm_operations ${CK_DEVICE_GEMM_INSTANCES})`). Every `if()` is evaluated
under the arch's environment, so a per-library arch list inside `if(GPU_TARGETS MATCHES "gfx9")`
counts only where the condition holds, and one given to an aggregate reaches the object libraries
it was really given. Each `add_subdirectory` keeps a copy of the variables as they are then: the
scope that directory's CMakeLists.txt runs in, and of the functions defined so far (CMake runs
the directory's file there and then, so a function defined later in the root is not yet known
to it; one defined in a branch not taken never is).

One simplification, stated here: the glob lists the root's subdirectories only (the evaluator
cannot ask the file system whether a path is a directory, and a file directly in the root is
never an instance directory).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from ckkb.extract.cmake_sources import Recorder
from ckkb.extract.library_archs import LibraryArchs
from ckkb.lang.cmake.interpreter import Break, Loader
from ckkb.lang.cmake.syntax import Branch, Command, Foreach, Function, Stmt

# variables the run sets for itself, not part of a directory's scope
_OWN = frozenset(("CMAKE_CURRENT_SOURCE_DIR", "CMAKE_CURRENT_LIST_DIR"))


@dataclass
class RootRun:
    """What one run of a root's CMakeLists.txt says, for one arch."""

    # directories right under the root that add_subdirectory adds; None when the file adds
    # none by any route (then nothing is known and every directory is taken as added)
    added: set[str] | None
    # directory -> the if-branch that last set a guard variable of the directory loop, in the
    # iteration that did not add it
    guards: dict[str, Branch | None] = field(default_factory=dict)
    targets: LibraryArchs = field(default_factory=LibraryArchs)
    # directory -> the variables when add_subdirectory added it (what its CMakeLists.txt and
    # the add_instance_library calls there see, as CMake scopes them)
    scopes: dict[str, dict[str, str]] = field(default_factory=dict)
    # directory -> the functions defined when add_subdirectory added it
    function_scopes: dict[str, dict[str, Function]] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)  # defined by the end of the run


class _RootInterpreter(Recorder):
    """The recorder, with the root's directories listed for file(GLOB) and read for
    file(READ), and the directory loop's iterations recorded one by one."""

    def __init__(
        self,
        env: dict[str, str],
        file: str,
        base: str,
        texts: dict[str, str],
        loop: Foreach | None,
        guard_vars: set[str],
        functions: dict[str, Function] | None = None,
        load: Loader | None = None,
    ) -> None:
        super().__init__(env, file, functions, load)
        self.env["CMAKE_CURRENT_SOURCE_DIR"] = self.env["CMAKE_CURRENT_LIST_DIR"] = base
        self.base = base
        self.texts = texts  # '<dir>/CMakeLists.txt' relative to the root -> its text
        self.read_file = self._read
        self.glob = self._glob
        self.loop = loop
        self.guard_vars = sorted(guard_vars)
        self.guards: dict[str, Branch | None] = {}
        self.scopes: dict[str, dict[str, str]] = {}
        self.function_scopes: dict[str, dict[str, Function]] = {}

    def command(self, c: Command) -> None:
        super().command(c)
        if c.name == "add_subdirectory" and self.subdirs:
            d = _top_dir(self.subdirs[-1], self.base)
            self.scopes.setdefault(d, {k: v for k, v in self.env.items() if k not in _OWN})
            self.function_scopes.setdefault(d, dict(self.functions))

    def _rel(self, path: str) -> str:
        return path[len(self.base) + 1 :] if path.startswith(self.base + "/") else path

    def _read(self, path: str) -> str:
        return self.texts.get(posixpath.normpath(self._rel(path)), "")

    def _glob(self, exprs: list[str]) -> list[str]:
        try:
            names = sorted(e.name for e in os.scandir(self.base) if e.is_dir(follow_symlinks=False))
        except OSError:
            return []
        pats = [self._rel(x) for x in exprs]
        return [f"{self.base}/{n}" for n in names if any(fnmatch.fnmatchcase(n, p) for p in pats)]

    def foreach(self, s: Foreach) -> None:
        if s is not self.loop:
            super().foreach(s)
            return
        got = self.foreach_items(s)
        if got is None:
            return
        var, items = got
        for item in items:
            start = len(self.subdirs)
            for v in self.guard_vars:
                self.origin.pop(v, None)
            self.env[var] = item
            try:
                self.run(s.body)
            except Break:
                break
            if len(self.subdirs) == start:
                cands = [self.origin.get(v) for v in self.guard_vars]
                hits = [b for b in cands if b is not None]
                self.guards[posixpath.basename(item.rstrip("/"))] = hits[-1] if hits else None


def _top_dir(path: str, base: str) -> str:
    rel = path[len(base) + 1 :] if path.startswith(base + "/") else path
    return posixpath.normpath(rel).split("/", 1)[0]


def run_root(
    stmts: list[Stmt],
    env: dict[str, str],
    root: Path,
    inst_dir: str,
    dir_texts: dict[str, str],
    loop: Foreach | None,
    guard_vars: set[str],
    adds_dirs: bool,
    functions: dict[str, Function] | None = None,
    load: Loader | None = None,
) -> RootRun:
    """Run the CMakeLists.txt of the instance root `inst_dir` (statements `stmts`) under `env`.
    `dir_texts` holds the directories' CMakeLists.txt by path from the tree's root; `loop` is
    the directory loop and `guard_vars` its guard variables; `adds_dirs` whether the file has
    an add_subdirectory anywhere; `functions` those CMake has defined before the root (copied);
    `load` reads the files include() names."""
    base = os.path.abspath(Path(root) / inst_dir)
    prefix = inst_dir + "/"
    texts = {k[len(prefix) :]: v for k, v in dir_texts.items() if k.startswith(prefix)}
    file = f"{inst_dir}/CMakeLists.txt"
    it = _RootInterpreter(env, file, base, texts, loop, guard_vars, dict(functions or {}), load)
    try:
        it.run(stmts)
    except (Break, RecursionError):
        pass
    added = {_top_dir(s, base) for s in it.subdirs} if adds_dirs else None
    return RootRun(added, it.guards, it.targets, it.scopes, it.function_scopes, it.functions)
