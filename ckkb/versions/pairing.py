"""Pairing the rows of two trees by identity, as multisets.

Rows that are the same thing in both trees (the same key) pair up; a key written twice in one tree
counts twice: its n-th occurrence, in file order, pairs with the n-th of the other tree, and what
is left over on one side was added or removed. File and line are never part of a key, so a thing
moved to another file pairs with itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

Row = dict[str, Any]


def where(row: Row) -> str | None:
    """`file:line` of a row (None for a row that is not there)."""
    return f"{row['file']}:{row['line']}" if row.get("file") else None


def pair(
    old: Iterable[Row], new: Iterable[Row], key: Callable[[Row], Hashable]
) -> tuple[list[Row], list[Row], list[tuple[Row, Row]]]:
    """(added: in `new` only, removed: in `old` only, same: (old, new) pairs) by `key`."""
    olds: dict[Hashable, list[Row]] = defaultdict(list)
    news: dict[Hashable, list[Row]] = defaultdict(list)
    for r in old:
        olds[key(r)].append(r)
    for r in new:
        news[key(r)].append(r)
    added: list[Row] = []
    removed: list[Row] = []
    same: list[tuple[Row, Row]] = []
    for k in list(olds) + [k for k in news if k not in olds]:
        a = sorted(olds.get(k, []), key=_place)
        b = sorted(news.get(k, []), key=_place)
        same.extend(zip(a, b, strict=False))
        removed.extend(a[len(b) :])
        added.extend(b[len(a) :])
    return added, removed, same


def _place(r: Row) -> tuple[str, str, int]:
    return (str(r.get("dir") or ""), str(r.get("file") or ""), int(r.get("line") or 0))
