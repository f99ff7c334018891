"""The `.cmake` files a CK tree's CMake may `include()`, for stage `ck.cmake`.

Listing (`module_files`, before any file is parsed): the `.cmake` files beside the CMakeLists.txt
the stage reads (the top one, those on the way to an instance root, and everything under each
root: `include(x.cmake)` is relative to the current directory) and under every directory a
`CMAKE_MODULE_PATH` assignment in those CMakeLists.txt names through `${PROJECT_SOURCE_DIR}`,
`${CMAKE_SOURCE_DIR}`, `${CMAKE_CURRENT_SOURCE_DIR}` or `${CMAKE_CURRENT_LIST_DIR}` (CK's
`cmake/`). The listing only decides which files are read and fingerprinted; which ones run is
decided by the interpreter's include(), as CMake decides it (`lang.cmake.interpreter`).

Loading (`Modules`): the parsed statements of a listed file, else the file read from the tree
when the listing missed it (answers stay right; only its change would not trigger a rebuild).
A file that include() reaches but that does not parse is kept in `failed` (file -> line,
message): what it would have said is unknown, and the stage says so.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from ckkb.extract.files import tree_files
from ckkb.kb.stages import FileResult
from ckkb.lang.cmake.interpreter import Break, Interpreter
from ckkb.lang.cmake.syntax import CMakeSyntaxError, Function, Stmt, parse_cmake, walk

SUFFIX = ".cmake"
_MODULE_PATH = re.compile(r"\bCMAKE_MODULE_PATH\b([^)]*)\)")
_DIR_VAR = re.compile(
    r"\$\{(PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR|CMAKE_CURRENT_SOURCE_DIR|CMAKE_CURRENT_LIST_DIR)\}"
    r"/?([^\s\"';)$]*)"
)


def _in_dir(root: Path, d: str) -> list[str]:
    """The .cmake files right in directory `d` (relative to root), as root-relative paths."""
    try:
        names = sorted(e.name for e in os.scandir(root / d) if e.is_file())
    except OSError:
        return []
    return [posixpath.join(d, n) if d else n for n in names if n.endswith(SUFFIX)]


def module_dirs(text: str, here: str) -> list[str]:
    """Root-relative directories that CMAKE_MODULE_PATH assignments in `text` (a CMake file in
    directory `here`) name through the tree's directory variables."""
    out: list[str] = []
    for m in _MODULE_PATH.finditer(text):
        for var, rest in _DIR_VAR.findall(m.group(1)):
            base = here if var.startswith("CMAKE_CURRENT") else ""
            d = posixpath.normpath(posixpath.join(base, rest)) if rest or base else ""
            if not d.startswith(".."):
                out.append("" if d == "." else d)
    return out


def module_files(root: Path, cmake_dirs: list[str], roots: tuple[str, ...]) -> list[str]:
    """Root-relative `.cmake` files the CMake in `cmake_dirs` (directories of the CMakeLists.txt
    read, '' for the top) and under the instance `roots` may include (module docstring)."""
    found: dict[str, None] = {}
    for d in cmake_dirs:
        found.update(dict.fromkeys(_in_dir(root, d)))
        try:
            text = (root / d / "CMakeLists.txt").read_text(errors="replace")
        except OSError:
            continue
        if "CMAKE_MODULE_PATH" not in text:
            continue
        for md in module_dirs(text, d):
            base = os.path.join(root, md)
            found.update(dict.fromkeys(posixpath.join(md, f) if md else f for f in _cmake(base)))
    for r in roots:
        found.update(dict.fromkeys(f"{r}/{f}" for f in _cmake(os.path.join(root, r))))
    return list(found)


def _cmake(base: str) -> list[str]:
    return [f for f in tree_files(base) if f.endswith(SUFFIX)]


class Modules:
    """include()'s view of the tree: statements by absolute path (lang.cmake's `Loader`)."""

    def __init__(self, root: Path, results: dict[str, FileResult]) -> None:
        self.root = os.path.abspath(root)
        self.results = results
        self._read: dict[str, list[Stmt] | None] = {}
        self.failed: dict[str, tuple[int, str]] = {}  # included but unparsable: line, message

    @property
    def read(self) -> list[str]:
        """The files include() read from the tree (not among `results`), found or not."""
        return list(self._read)

    def _rel(self, path: str) -> str | None:
        prefix = self.root + "/"
        return path[len(prefix) :] if path.startswith(prefix) else None

    def __call__(self, path: str) -> list[Stmt] | None:
        rel = self._rel(path)
        if rel is None:
            return None
        res = self.results.get(rel)
        if res is not None:
            stmts = res.facts.get("stmts")
            if "syntax_error" in res.facts:
                self.failed.setdefault(rel, res.facts["syntax_error"])
            return stmts if isinstance(stmts, list) else None
        if rel not in self._read:  # not listed: read it here
            self._read[rel] = self._parse(rel)
        return self._read[rel]

    def _parse(self, rel: str) -> list[Stmt] | None:
        try:
            return parse_cmake((Path(self.root) / rel).read_text(errors="replace"))[0]
        except OSError:
            return None
        except CMakeSyntaxError as e:
            self.failed.setdefault(rel, (e.line, str(e)))
            return None

    def defined_in(self, name: str) -> dict[int, str]:
        """id(definition) -> the root-relative file, for every function `name` the files read
        define (a function met only through include() is named by its file this way)."""
        out: dict[int, str] = {}
        loaded = {rel: r.facts.get("stmts") for rel, r in self.results.items()}
        loaded.update(self._read)
        for rel, stmts in loaded.items():
            for s in walk(stmts) if isinstance(stmts, list) else ():
                if isinstance(s, Function) and s.name.lower() == name:
                    out[id(s)] = rel
        return out


class _Recording(Modules):
    """Modules, noting each file include() reads."""

    def __init__(self, root: Path, results: dict[str, FileResult]) -> None:
        super().__init__(root, results)
        self.seen: list[str] = []

    def __call__(self, path: str) -> list[Stmt] | None:
        stmts = super().__call__(path)
        rel = self._rel(path)
        if stmts is not None and rel is not None:
            self.seen.append(rel)
        return stmts


def included_by(
    root: Path, results: dict[str, FileResult], rels: list[str]
) -> dict[str, list[str]]:
    """CMake file (root-relative, parsed in `results`) -> the files its run include()s,
    nested ones too, in the order they run. The files run in the order of `rels` (the top one
    first), each with the variables the first left (CMAKE_MODULE_PATH among them); no arch is
    set, so an include() under an if() on the targets is not followed."""
    load = _Recording(root, results)
    env = {"PROJECT_SOURCE_DIR": load.root, "CMAKE_SOURCE_DIR": load.root}
    out: dict[str, list[str]] = {}
    for i, rel in enumerate(rels):
        res = results.get(rel)
        stmts = res.facts.get("stmts") if res is not None else None
        if not isinstance(stmts, list):
            continue
        it = Interpreter(env, rel, load=load)
        try:
            it.run(stmts)
        except (Break, RecursionError):
            pass
        if i == 0:
            env = it.env
        out[rel], load.seen = load.seen, []
    return out
