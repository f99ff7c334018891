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


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str))
    sys.stdout.write("\n")


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
