"""Listing input files without following symlinked directories (no symlink loops)."""

from __future__ import annotations

import os
from pathlib import Path


def list_files(root: Path, subdir: str, suffixes: tuple[str, ...]) -> list[Path]:
    """Files under root/subdir whose name ends with one
    of `suffixes`, sorted, symlinked dirs not entered."""
    base = root / subdir
    if not base.is_dir():
        return []
    out = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames.sort()
        for f in filenames:
            if f.endswith(suffixes):
                out.append(Path(dirpath) / f)
    return sorted(out)
