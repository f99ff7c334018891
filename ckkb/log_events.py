"""What reading a ckProfiler log yields (`ckkb.logs.parse_lines`): one event per result, error,
race start and race end, and how a race's Best-line labels read (dtype, layout)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckkb import vocabulary


@dataclass(slots=True)
class Result:
    """One instance line: timed, unsupported, or (rarely) untimed."""

    line: int
    name: str
    raw: str
    ms: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    supported: bool = True
    verified: bool | None = None
    kbatch: int | None = None


@dataclass(slots=True)
class ParseError:
    line: int
    message: str
    text: str


@dataclass(slots=True)
class RaceStart:
    line: int


@dataclass
class RaceEnd:
    """Everything the log said about one race except its results (those came as Result events)."""

    line: int  # first line of the race
    end_line: int
    results: int = 0
    timed: int = 0
    command: str | None = None  # from a '# command:' comment
    descriptors: list[dict[str, Any]] = field(default_factory=list)
    instances_found: int | None = None
    warmup: int | None = None
    iterations: int | None = None
    best: dict[str, Any] | None = None  # {"ms","tflops","gbps","name","line", header keys...}
    header: dict[str, Any] = field(
        default_factory=dict
    )  # Best-line header: datatype, ALayout, M, N, ...
    recognised: int = 0  # lines ckProfiler printed that we understood
    skipped: int = 0  # lines not printed by ckProfiler (skipped)


Event = Result | ParseError | RaceStart | RaceEnd


def normalise_dtype(label: str | None) -> str | None:
    """'f16' -> 'fp16': the Best line spells types as CK's short names, the legends (and race rows)
    say fp16; one vocabulary (ckkb.vocabulary) reads every spelling."""
    return vocabulary.label(label)


def layout_from_best(header: dict[str, Any]) -> str | None:
    """ALayout/BLayout of a Best line -> mk_kn / mk_nk / km_kn / km_nk."""
    a, b = header.get("ALayout"), header.get("BLayout")
    if not isinstance(a, str) or not isinstance(b, str):
        return None
    am = {"RowMajor": "mk", "ColumnMajor": "km"}.get(a)
    bm = {"RowMajor": "kn", "ColumnMajor": "nk"}.get(b)
    return f"{am}_{bm}" if am and bm else None
