"""Which instance sources a gpu/<dir>/CMakeLists.txt really hands to `add_instance_library`.

A directory's CMakeLists.txt names its sources (`list(APPEND X a.cpp ...)` then
`add_instance_library(name ${X})`). A `.cpp` under the directory that no call names is never
compiled: CK's 2024-10 tree has a stray copy `gemm_universal_streamk/gemm_universal_streamk/`
that no CMake reaches, and counting it doubled every count. The file is run with the CMake
interpreter under the arch's environment, so `if()`-guarded `list(APPEND ...)` are followed.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from ckkb.extract.library_archs import TARGET_COMMANDS, LibraryArchs
from ckkb.lang.cmake.interpreter import Break, Interpreter
from ckkb.lang.cmake.syntax import Command, Stmt


class Recorder(Interpreter):
    """The interpreter, with every add_instance_library call's arguments recorded, and the
    commands that give a library target its own arch list (`library_archs`)."""

    def __init__(self, env: dict[str, str], file: str) -> None:
        super().__init__(dict(env, CMAKE_CURRENT_SOURCE_DIR="."), file)
        self.calls: list[tuple[int, list[str]]] = []
        self.targets = LibraryArchs()

    def command(self, c: Command) -> None:
        if c.name.lower() == "add_instance_library":
            self.calls.append((c.line, self.words(c.args)))
            return
        if c.name in TARGET_COMMANDS:
            self.targets.read(c, self.words(c.args), self.file)
        super().command(c)


@dataclass
class DirLibraries:
    """What one directory's CMakeLists.txt says about its instance libraries."""

    library_of: dict[str, str]  # source (relative to the directory, normalised) -> library
    first_line: int  # line of the first add_instance_library call
    targets: LibraryArchs


def read_dir(stmts: list[Stmt], env: dict[str, str], file: str) -> DirLibraries | None:
    """The directory's add_instance_library calls and per-library arch lists, run under `env`;
    None when the file calls add_instance_library nowhere."""
    it = Recorder(env, file)
    try:
        it.run(stmts)
    except (Break, RecursionError):
        pass
    if not it.calls:
        return None
    out: dict[str, str] = {}
    for _line, words in it.calls:
        for w in words[1:]:
            out.setdefault(posixpath.normpath(w), words[0] if words else "")
    return DirLibraries(out, it.calls[0][0], it.targets)
