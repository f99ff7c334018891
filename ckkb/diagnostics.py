"""Diagnostics: what an extractor or parser could not read, always with a file and a line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnostic:
    """One problem in one input. `line` is 1-based; 0 means the whole file."""

    file: str
    line: int
    message: str
    severity: str = "warning"  # "warning" | "error"
    stage: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.severity}: {self.message}"
