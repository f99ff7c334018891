"""A second method for `ckkb review` / aiter_diff between two aiter trees, written apart from
ckkb's readers: kernel lists read with regular expressions (one `ID: Class(args),` entry a line,
commented lines skipped), tuned rows with the csv module. Used by test_review_trees.py."""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path

_DICT = re.compile(r"^(\w+)\s*=\s*\{\s*$")
_ENTRY = re.compile(r"^\s*(\d+)\s*:\s*(\w+)\((.*)\)\s*,?\s*(#.*)?$")


def kernel_lists(csrc: Path) -> dict[tuple[str, str], dict[int, str]]:
    """(directory, list name) -> id -> the entry's arguments, spaces and trailing comma dropped
    (the last entry written for an id wins, as in Python)."""
    out: dict[tuple[str, str], dict[int, str]] = {}
    files = [p for p in csrc.rglob("*.py") if p.name.endswith(("_common.py", "_instance.py"))]
    for p in sorted(files):
        current: dict[int, str] | None = None
        for line in p.read_text(errors="replace").splitlines():
            m = _DICT.match(line)
            if m:
                current = out.setdefault((p.parent.name, m.group(1)), {})
                continue
            if current is not None and line.startswith("}"):
                current = None
                continue
            e = _ENTRY.match(line) if current is not None else None
            if e and current is not None:
                current[int(e.group(1))] = re.sub(r"\s+", "", e.group(3)).rstrip(",")
    return {k: v for k, v in out.items() if v}


def renumbering(old: Path, new: Path) -> dict[str, set[tuple]]:
    """Lists in both trees: {"moved": {(dir, list, args, old ids, new ids)}, "reassigned":
    {(dir, list, id)}}."""
    a, b = kernel_lists(old), kernel_lists(new)
    out: dict[str, set[tuple]] = {"moved": set(), "reassigned": set()}
    for key in a.keys() & b.keys():
        ids_a: dict[str, list[int]] = defaultdict(list)
        ids_b: dict[str, list[int]] = defaultdict(list)
        for i, args in a[key].items():
            ids_a[args].append(i)
        for i, args in b[key].items():
            ids_b[args].append(i)
        for args in ids_a.keys() & ids_b.keys():
            if sorted(ids_a[args]) != sorted(ids_b[args]):
                out["moved"].add(
                    (*key, args, tuple(sorted(ids_a[args])), tuple(sorted(ids_b[args])))
                )
        for i in a[key].keys() & b[key].keys():
            if a[key][i] != b[key][i]:
                out["reassigned"].add((*key, i))
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fastest_by_key(files: list[Path], key: tuple[str, ...]) -> dict[tuple, float]:
    """key -> us of the fastest row (first on a tie) over `files`, keys stripped."""
    out: dict[tuple, float] = {}
    for p in files:
        for r in _rows(p):
            k = tuple(r[c].strip() for c in key)
            us = float(r["us"])
            if k not in out or us < out[k]:
                out[k] = us
    return out


def first_by_key(files: list[Path], key: tuple[str, ...]) -> dict[tuple, float]:
    """key -> us of the first row written for it."""
    out: dict[tuple, float] = {}
    for p in files:
        for r in _rows(p):
            out.setdefault(tuple(r[c].strip() for c in key), float(r["us"]))
    return out
