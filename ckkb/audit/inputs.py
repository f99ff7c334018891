"""The files the audit reads from the tree itself: the Python modules aiter's MoE tuner check
may run statically (the tuner, its list getters and whatever they import: `aiter/__init__.py`,
`aiter/ops/moe_op.py`, `aiter/utility/dtypes.py`, ...) and the C++ enum headers of
`csrc/include/`. Which modules an import reaches is only known while running, so the inputs are
every module where it may land: the package's and the tuner directories' `.py` files.

They are the audit stage's declared files, so the build hashes them, puts them in the tree's
fingerprint and combines the audit again when one changes; the check reads no file outside them
(`Readable`), so a read the build does not see is an unchecked row with that reason, never a
stale answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ckkb.extract.aiter_tuners import TUNER_DIRS, package_dir, stage_paths
from ckkb.extract.files import list_files


def audit_inputs(root: Path) -> list[Path]:
    """The audit stage's files, relative to root (the wheel's package files as `../aiter/...`)."""
    root = Path(root)
    out: list[Path] = []
    pkg = package_dir(root)
    if pkg is not None:
        out += list_files(pkg.parent, pkg.name, (".py",))
    for sub in TUNER_DIRS:
        out += list_files(root, sub, (".py",))
    inc = root / "csrc" / "include"
    if inc.is_dir():
        out += sorted(p for p in inc.iterdir() if p.suffix == ".h" and p.is_file())
    seen: set[str] = set()
    unique = []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return stage_paths(root, unique)


class Readable:
    """Whether the audit may read a file: it is one of the tree's `audit_inputs`."""

    def __init__(self, root: Path, rels: Iterable[str] | None = None) -> None:
        """rels: the stage's files as the build listed them (else listed here)."""
        listed = audit_inputs(root) if rels is None else rels
        self.paths = {os.path.realpath(Path(root) / p) for p in listed}

    def __call__(self, path: Path) -> bool:
        return os.path.realpath(path) in self.paths


def readable_for(ctx: Any) -> Readable:
    """The audit's one Readable for its tree (the inputs listed once per audit)."""
    if "_readable" not in ctx.__dict__:
        ctx.__dict__["_readable"] = Readable(Path(ctx.root))
    r: Readable = ctx.__dict__["_readable"]
    return r
