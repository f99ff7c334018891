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

from ckkb.extract.aiter_tuners import audit_inputs as audit_inputs  # listed there, once


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
