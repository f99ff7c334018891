"""Which instance sources a gpu/<dir>/CMakeLists.txt really hands to `add_instance_library`.

A directory's CMakeLists.txt names its sources (`list(APPEND X a.cpp ...)` then
`add_instance_library(name ${X})`). A `.cpp` under the directory that no call names is never
compiled: CK's 2024-10 tree has a stray copy `gemm_universal_streamk/gemm_universal_streamk/`
that no CMake reaches, and counting it doubled every count. The file is run with the CMake
interpreter under the arch's environment, so `if()`-guarded `list(APPEND ...)` are followed.
Each call is kept with the add_instance_library in effect where it is made and the caller's
variables then (what CMake runs the function with: `ckkb.extract.cmake_calls`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from ckkb.extract.library_archs import TARGET_COMMANDS, LibraryArchs
from ckkb.lang.cmake.interpreter import Break, Interpreter, Loader
from ckkb.lang.cmake.syntax import Command, Function, Stmt

LIBRARY_FUNCTION = "add_instance_library"


@dataclass
class Call:
    """One add_instance_library call as CMake makes it."""

    line: int
    words: list[str]  # its arguments, evaluated
    function: Function | None  # the definition in effect there (None: not defined)
    env: dict[str, str]  # the caller's variables at the call


class Recorder(Interpreter):
    """The interpreter, with every add_instance_library call's arguments recorded, and the
    commands that give a library target its own arch list (`library_archs`)."""

    def __init__(
        self,
        env: dict[str, str],
        file: str,
        functions: dict[str, Function] | None = None,
        load: Loader | None = None,
    ) -> None:
        super().__init__(dict(env, CMAKE_CURRENT_SOURCE_DIR="."), file, load=load)
        if functions is not None:  # the functions CMake has defined so far (shared, not copied)
            self.functions = functions
        self.calls: list[Call] = []
        self.targets = LibraryArchs()

    def command(self, c: Command) -> None:
        if c.name == LIBRARY_FUNCTION:
            fn = self.functions.get(LIBRARY_FUNCTION)
            self.calls.append(Call(c.line, self.command_words(c), fn, dict(self.env)))
            return
        if c.name in TARGET_COMMANDS:
            self.targets.read(c, self.command_words(c), self.list_file)
        super().command(c)


@dataclass
class DirLibraries:
    """What one directory's CMakeLists.txt says about its instance libraries."""

    library_of: dict[str, str]  # source (relative to the directory, normalised) -> library
    first_line: int  # line of the first add_instance_library call
    targets: LibraryArchs
    calls: list[Call]


def read_dir(
    stmts: list[Stmt],
    env: dict[str, str],
    file: str,
    functions: dict[str, Function] | None = None,
    load: Loader | None = None,
) -> DirLibraries | None:
    """The directory's add_instance_library calls and per-library arch lists, run under `env`
    with the functions CMake has defined when it reaches the directory (`functions`, copied);
    None when the file calls add_instance_library nowhere."""
    it = Recorder(env, file, dict(functions or {}), load)
    try:
        it.run(stmts)
    except (Break, RecursionError):
        pass
    if not it.calls:
        return None
    out: dict[str, str] = {}
    for call in it.calls:
        for w in call.words[1:]:
            out.setdefault(posixpath.normpath(w), call.words[0])
    return DirLibraries(out, it.calls[0].line, it.targets, it.calls)
