"""Printing: JSON for tools, rich tables for people. No logic that a query could hold."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def emit_json(obj: Any, *, one_line_items: bool = False) -> None:
    """`obj` as JSON, indented by 2. one_line_items: each object inside a list on one line (a
    large answer, e.g. a whole-tree `ckkb diff`: one item per line to grep, and written by
    json's C encoder, where indenting every value runs its pure-Python one at a fifth the
    speed); the same JSON value either way."""
    if one_line_items:
        sys.stdout.writelines(_item_lines(obj, ""))
    else:
        sys.stdout.write(json.dumps(obj, indent=2, default=str))
    sys.stdout.write("\n")


def _item_lines(obj: Any, pad: str) -> Any:
    """The text of `obj`, objects and lists indented, except an object inside a list (one line)."""
    if isinstance(obj, dict) and obj:
        inner = pad + "  "
        yield "{"
        for n, (k, v) in enumerate(obj.items()):
            yield ("\n" if n == 0 else ",\n") + inner + json.dumps(str(k)) + ": "
            yield from _item_lines(v, inner)
        yield "\n" + pad + "}"
    elif isinstance(obj, (list, tuple)) and obj:
        inner = pad + "  "
        yield "["
        for n, v in enumerate(obj):
            yield ("\n" if n == 0 else ",\n") + inner
            if isinstance(v, dict):
                yield json.dumps(v, default=str)
            else:
                yield from _item_lines(v, inner)
        yield "\n" + pad + "]"
    else:
        yield json.dumps(obj, default=str)


def print_table(
    rows: Iterable[dict[str, Any]] | Iterable[Sequence[Any]],
    columns: Sequence[str],
    title: str | None = None,
) -> None:
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c)
    for r in rows:
        vals = [r.get(c) for c in columns] if isinstance(r, dict) else list(r)
        t.add_row(*["" if v is None else str(v) for v in vals])
    console.print(t)


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)
