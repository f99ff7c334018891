"""Listing input files without following symlinked directories (no symlink loops)."""

from __future__ import annotations

import os
from pathlib import Path

from ckkb.kb.stages import per_build


def list_files(root: Path, subdir: str, suffixes: tuple[str, ...]) -> list[Path]:
    """Files under root/subdir whose name ends with one
    of `suffixes`, sorted, symlinked dirs not entered."""
    base = os.path.join(root, subdir)
    top = Path(base)  # `top / rel` parses only rel: a third less time than Path(base, rel)
    return [top / rel for rel in tree_files(base) if rel.endswith(suffixes)]


@per_build  # several stages list one directory (gpu/: instances, registrations, CMake rules)
def tree_files(base: str) -> tuple[str, ...]:
    """Every file under the directory `base`, '/'-separated and relative to it, in the order of
    sorted Paths (part by part); symlinked dirs not entered; () when `base` is no directory."""
    if not os.path.isdir(base):
        return ()
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames.sort()
        rel = dirpath[len(base) :].lstrip(os.sep).replace(os.sep, "/")
        prefix = rel + "/" if rel else ""
        out.extend(prefix + f for f in filenames)
    out.sort(key=lambda r: r.split("/"))
    return tuple(out)
