"""What a build derives from several files of a tree before any stage runs (where the instance
libraries are, the include directories), kept in the build's cache for the next build.

Every build's inventory needs them to list the stages' files, and reading them means reading the
tree's CMake (the top CMakeLists.txt whole, with the condition reader): a rebuild with nothing
changed would spend ~0.15 CPU-s there. The value is kept with the size and mtime of every path
its computation read (files, and directories it listed: a directory's mtime changes when an entry
is added or removed), and reused while all are unchanged, as the cache reuses a file's result.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ckkb import __version__
from ckkb.kb.stages import build_store

Stamp = tuple[str, int, int]  # root-relative path, size, mtime_ns (-1, -1: no such path)


def stamps(root: Path, rels: list[str]) -> list[Stamp]:
    out: list[Stamp] = []
    for rel in rels:
        try:
            st = os.stat(os.path.join(root, rel))
            out.append((rel, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((rel, -1, -1))
    return out


def kept(
    name: str, root: Path, compute: Callable[[], tuple[Any, list[str]]], given: Any = None
) -> Any:
    """`compute()` -> (a JSON value, the root-relative paths it read); outside a build it just
    runs. In a build, the value the build's cache keeps for (`name`, root) while every path read
    is unchanged and `given` (what else the value depends on, JSON) is the same, else computed
    and kept. `name` names the computation and its version."""
    store = build_store()
    if store is None:
        return compute()[0]
    key, where = f"{name}/ckkb-{__version__}", os.fspath(root)
    blob = store.recall(key, where)
    try:  # a record this code did not write (damaged, or of another form) is not reused
        read, before, value = json.loads(blob) if blob is not None else ((), None, None)
        was = [(str(rel), int(size), int(mtime)) for rel, size, mtime in read]
    except (ValueError, TypeError):
        was = []
    if was and before == given and was == stamps(root, [rel for rel, _, _ in was]):
        return value
    value, paths = compute()
    read = stamps(root, list(dict.fromkeys(paths)))
    store.remember(key, where, json.dumps([read, given, value]).encode())
    return value
