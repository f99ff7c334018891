"""Which instance sources a gpu/<dir>/CMakeLists.txt really hands to `add_instance_library`.

A directory's CMakeLists.txt names its sources (`list(APPEND X a.cpp ...)` then
`add_instance_library(name ${X})`). A `.cpp` under the directory that no call names is never
compiled: CK's 2024-10 tree has a stray copy `gemm_universal_streamk/gemm_universal_streamk/`
that no CMake reaches, and counting it doubled every count. The file is run with the CMake
interpreter under the arch's environment, so `if()`-guarded `list(APPEND ...)` are followed.
"""

from __future__ import annotations

import posixpath

from ckkb.lang.cmake.interpreter import Break, Interpreter
from ckkb.lang.cmake.syntax import CMakeSyntaxError, Command, Stmt, parse_cmake


class _Recorder(Interpreter):
    """The interpreter, with every add_instance_library call's arguments recorded."""

    def __init__(self, env: dict[str, str], file: str) -> None:
        super().__init__(dict(env, CMAKE_CURRENT_SOURCE_DIR="."), file)
        self.calls: list[tuple[int, list[str]]] = []

    def command(self, c: Command) -> None:
        if c.name.lower() == "add_instance_library":
            self.calls.append((c.line, self.words(c.args)))
            return
        super().command(c)


def parse_dir_cmake(text: str) -> list[Stmt] | None:
    """The statements of a directory's CMakeLists.txt, or None when it does not parse."""
    try:
        stmts, _diags = parse_cmake(text)
    except CMakeSyntaxError:
        return None
    return stmts


def listed_sources(
    stmts: list[Stmt], env: dict[str, str], file: str
) -> tuple[set[str], int] | None:
    """(sources named by add_instance_library calls, relative to the directory, normalised; the
    line of the first call), or None when the file makes no such call (then nothing is known
    and every source is taken as listed)."""
    it = _Recorder(env, file)
    try:
        it.run(stmts)
    except (Break, RecursionError):
        pass
    if not it.calls:
        return None
    out: set[str] = set()
    for _line, words in it.calls:
        for w in words[1:]:
            out.add(posixpath.normpath(w))
    return out, it.calls[0][0]
