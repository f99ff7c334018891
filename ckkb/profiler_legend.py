"""What a ckProfiler legend is: an op's positional arguments, each with the role a command
builder gives it (dtype, layout, M, warm-up, ...). Read from the knowledge base by
`ckkb.queries.profiler.load_legend`; used by `ckkb.profiler_cmd` and ingestion."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def role(name: str) -> str | None:
    """Legend entry name -> the role a command builder gives it."""
    n = name.strip()
    low = n.lower()
    if n in ("M", "N", "K"):
        return n
    if n in ("StrideA", "StrideB"):
        return "stride_" + n[-1].lower()
    if n in ("StrideC", "StrideE"):
        return "stride_c"
    if "data type" in low and "index" not in low:
        return "dtype"
    if "layout" in low:
        return "layout"
    if low.startswith("verification") or low == "verify":
        return "verify"
    if low.startswith("initialization") or low.startswith("initialisation"):
        return "init"
    if low.startswith("print tensor"):
        return "log"
    if low.startswith("time kernel"):
        return "time"
    if "warm-up" in low or "warmup" in low or "warm up" in low:
        return "warmup"
    if "iteration" in low:
        return "iters"
    if "kbatch" in low or "split k" in low or "split-k" in low:
        return "kbatch"
    if "rotating" in low:
        return "rotating"
    if "tensor operation" in low:
        return "op"
    return None


@dataclass
class Legend:
    op: str
    args: list[dict[str, Any]]  # positional profiler_args rows, by position
    argc_allowed: list[int] = field(default_factory=list)
    quirks: list[dict[str, Any]] = field(default_factory=list)
    description: str = ""
    file: str = ""

    def by_role(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for a in self.args:
            r = role(a["name"])
            if r and r not in out:
                out[r] = a
        return out

    @property
    def max_position(self) -> int:
        return max((a["position"] for a in self.args), default=1)


def json_value(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v
