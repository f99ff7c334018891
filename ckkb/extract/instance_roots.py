"""Which directories of a CK tree hold instance libraries, from the tree's own CMake.

CK's instance library lives in `library/src/tensor_operation_instance/gpu`, but a fork can add a
second one beside it (`library/src/<fork>_instance/...`), or keep its only one elsewhere. The
directories are found the way CMake reaches them: from the top `CMakeLists.txt`, following
`add_subdirectory` (a literal path, or a directory loop such as CK's
`add_subdirectory(${target_dir})` over `file(GLOB ...)`, which reaches every subdirectory that
has a CMakeLists.txt). A directory whose CMakeLists.txt calls
`add_instance_library` is one of an instance library's directories; the directory that added it
is the library's root (CK's `gpu/`), whose subdirectories are the `dir` of every instance.

When the top CMakeLists.txt reaches no instance library (small trees without the CMake chain),
CK's own path is taken where it exists: `from_chain` says which of the two happened.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckkb.extract.kept import kept
from ckkb.kb.stages import per_build
from ckkb.lang.cmake.syntax import CMakeSyntaxError, tokenize
from ckkb.sources import CK_INSTANCE_DIR

CMAKE = "CMakeLists.txt"
LIBRARY_FUNCTION = "add_instance_library"


@dataclass(frozen=True)
class InstanceRoots:
    roots: tuple[str, ...]  # '/'-separated, relative to the CK root; CK's own first when present
    from_chain: bool  # found by following add_subdirectory from the top CMakeLists.txt
    # per root (same order): the directories CMake passes through from the top to it, top
    # first, neither the top nor the root itself (CK: ("library",)); () when not from_chain
    chain: tuple[tuple[str, ...], ...] = ()


def _commands(path: Path, library: bool = True) -> list[tuple[str, str]]:
    """(command name, first argument) of each command of a CMakeLists.txt; [] when unreadable.
    `library`: whether a call of the library function matters (else only add_subdirectory)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    if "add_subdirectory" not in text and (not library or LIBRARY_FUNCTION not in text):
        return []  # reaches no further and calls no library function that matters: no tokenizing
    try:
        cmds = tokenize(text)
    except CMakeSyntaxError:
        return []
    return [(c.name, c.args[0].value if c.args else "") for c in cmds]


@per_build  # stages list their files by it and combines read it: one walk per build
def instance_roots(root: Path) -> InstanceRoots:
    """The instance-library roots of the CK tree at `root` (see the module docstring); in a
    build, kept in the build's cache while the files read are unchanged (`kept`)."""
    root = Path(root)

    def walked() -> tuple[list[Any], list[str]]:
        read: list[str] = []
        got = _walk(root, read)
        return [got.roots, got.from_chain, got.chain], read

    roots, from_chain, chain = kept("instance_roots/1", root, walked)
    return InstanceRoots(tuple(roots), from_chain, tuple(tuple(via) for via in chain))


def _walk(root: Path, read: list[str] | None = None) -> InstanceRoots:
    """instance_roots, computed: a breadth-first walk of add_subdirectory from the top. The
    paths it reads or lists go to `read`."""
    read = [] if read is None else read
    found: list[str] = []
    seen: set[str] = set()
    parent_of: dict[str, str | None] = {}
    todo: list[tuple[str, str | None]] = [("", None)]  # (directory, the directory that added it)
    while todo:
        d, parent = todo.pop(0)
        if d in seen:
            continue
        seen.add(d)
        parent_of[d] = parent
        base = root / d if d else root
        calls = False
        # a sibling already made `parent` a root: only this directory's add_subdirectory calls
        # matter (CK's gpu/ has ~100 such directories, each with a long list of sources)
        known = parent is None or parent in found
        read.append(posixpath.join(d, CMAKE))
        for name, first in _commands(base / CMAKE, library=not known):
            if name == LIBRARY_FUNCTION:
                calls = True
            elif name == "add_subdirectory" and first:
                if "${" in first:  # a directory loop: every subdirectory with a CMakeLists.txt
                    subdirs = [p for p in sorted(base.iterdir()) if p.is_dir()]
                    read.append(d or ".")
                    read.extend(posixpath.join(d, p.name, CMAKE) for p in subdirs)
                    todo.extend(
                        (posixpath.join(d, p.name) if d else p.name, d)
                        for p in subdirs
                        if not p.is_symlink() and (p / CMAKE).is_file()
                    )
                else:
                    sub = posixpath.normpath(posixpath.join(d, first))
                    read.append(posixpath.join(sub, CMAKE))
                    if not sub.startswith("..") and (root / sub / CMAKE).is_file():
                        todo.append((sub, d))
        if calls and parent is not None and parent not in found:
            found.append(parent)
    if found:
        found.sort(key=lambda r: (r != CK_INSTANCE_DIR, r))
        return InstanceRoots(tuple(found), True, tuple(_via(r, parent_of) for r in found))
    read.append(CK_INSTANCE_DIR)
    conventional = (CK_INSTANCE_DIR,) if (root / CK_INSTANCE_DIR).is_dir() else ()
    return InstanceRoots(conventional, False)


def _via(d: str, parent_of: dict[str, str | None]) -> tuple[str, ...]:
    """The directories between the top ('') and `d`, exclusive, top first."""
    out: list[str] = []
    p = parent_of.get(d)
    while p:
        out.append(p)
        p = parent_of.get(p)
    return tuple(reversed(out))


def root_of(rel: str, roots: tuple[str, ...]) -> str | None:
    """The instance root `rel` lies under (the deepest one), or None."""
    best = None
    for r in roots:
        if rel.startswith(r + "/") and (best is None or len(r) > len(best)):
            best = r
    return best


def dir_under(rel: str, roots: tuple[str, ...]) -> str:
    """The directory right under the instance root of `rel` ('' for a file directly in a root or
    outside every root)."""
    r = root_of(rel, roots)
    if r is None:
        return ""
    rest = rel[len(r) + 1 :]
    return rest.split("/", 1)[0] if "/" in rest else ""
