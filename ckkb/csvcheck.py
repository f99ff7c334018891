"""CSV rows with a reader error (a field over the csv module's limit, a bad quote) as one line
naming the file and line, not a traceback. Stdlib only: `python -m ckkb.harness` imports it on GPU
hosts that have little else."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ckkb.errors import CkkbError


def rows(reader: Any, path: str | Path, line_of: Any = None) -> Iterator[Any]:
    """Iterate a csv.reader / DictReader; csv.Error becomes CkkbError '<path>:<line>: ...'.
    `line_of(n)` maps the reader's line_num to the file's line when lines were filtered."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            n = getattr(getattr(reader, "reader", reader), "line_num", 0)  # DictReader lags
            line = line_of(n) if line_of else n
            raise CkkbError(f"{path}:{line}: not a CSV row ({e})") from None
        yield row
