"""Fixture trees that are a base plus an overlay: tests/fixtures/<name> holds only the files that
differ from its base, tests/fixtures/ck_mini (or an aiter tree: aiter_2026_pick), each overlay's
README lists them, copied over a copy of the base. One helper for all of them, so no overlay
repeats its base's files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
BASE = "ck_mini"
UNIVERSAL = "library/src/tensor_operation_instance/gpu/gemm_universal"


def overlay_tree(tmp: Path, overlay: str, name: str | None = None, base: str = BASE) -> Path:
    """`base` (ck_mini) with tests/fixtures/`overlay` copied over it, at tmp/`name` (default:
    overlay)."""
    root = Path(tmp) / (name or overlay)
    shutil.copytree(FIXTURES / base, root)
    shutil.copytree(FIXTURES / overlay, root, dirs_exist_ok=True)
    return root


def fork_tree(tmp: Path) -> Path:
    """The ck_fork overlay, plus the stray directory its README describes: a copy of the fork's
    gemm_universal list directory one level down, which no add_instance_library call names."""
    root = overlay_tree(tmp, "ck_fork")
    lists = root / UNIVERSAL / "device_gemm_xdl_universal_bf16_bf16_bf16"
    shutil.copytree(lists, root / UNIVERSAL / "gemm_universal" / lists.name)
    return root


def fixture_file(overlay: str, rel: str) -> Path:
    """Where `rel` of the overlaid tree comes from: the overlay's file, else ck_mini's."""
    own = FIXTURES / overlay / rel
    return own if own.is_file() else FIXTURES / BASE / rel


def fixture_line(overlay: str, rel: str, pattern: str) -> int:
    """A second method for a pinned line: the 1-based line of the first match of `pattern` (a
    regex) in `rel` of the overlaid tree, read from the fixture file itself."""
    lines = fixture_file(overlay, rel).read_text().splitlines()
    return next(i + 1 for i, ln in enumerate(lines) if re.search(pattern, ln))
