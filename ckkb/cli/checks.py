"""Parameter types for numeric options, checked before any work starts (one line from click).

GEMM dimensions are positive and fit ckProfiler's `int`; counts are at least 1; seconds are
finite and positive (click's FloatRange lets `nan` through: every comparison with it is false).
"""

from __future__ import annotations

import math
from typing import Any

import click

from ckkb.profiler_cmd import INT_MAX

DIM = click.IntRange(1, INT_MAX)
COUNT = click.IntRange(1, INT_MAX)
NON_NEGATIVE = click.IntRange(0, INT_MAX)
STRIDE = click.IntRange(-1, INT_MAX)  # -1: ckProfiler's "packed" default
JOBS = click.IntRange(1, 1024)
ROW_ID = click.IntRange(-(2**63), 2**63 - 1)


class Seconds(click.ParamType):
    """A finite, positive number of seconds."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"{value!r}: expected a finite number of seconds > 0", param, ctx)
        return seconds


SECONDS = Seconds()
