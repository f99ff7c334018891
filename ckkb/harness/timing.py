"""Time GEMM candidates per shape in two regimes, warm and cold, interleaved.

The scheduling, statistics, rotation sizing and verification policy here are plain Python so
they can be tested on a CPU with fake timers. The device side lives behind a small `Backend`
interface; `ckkb.harness.torch_backend` implements it with torch (imported only there).

- warm: one operand set, called back to back (what the tuners measure);
- cold: operand sets rotated so that their total exceeds the last-level cache (`rotation_count`);
- every candidate's output is verified against a higher-precision reference before it is timed;
  a candidate that fails is recorded (status `verify_failed`) and not timed;
- slots (candidate x regime) are sampled in rounds, one batch per slot per round, A B A B ...,
  never all of A then all of B; the first batch of every slot is discarded (it absorbs lazy
  initialisation and any compilation); rounds continue until each slot's median and spread are
  stable or a bound on samples or time is reached.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

REGIMES: tuple[str, ...] = ("warm", "cold")

# ||out - ref|| / ||ref|| allowed per operand dtype (fp32 reference on the same device). bf16
# output rounding alone gives ~3e-3; fp16 ~4e-4; fp8 operands are compared against the
# reference on the same quantised values, so only the bf16 output rounding remains.
TOLERANCE: dict[str, float] = {"bf16": 1e-2, "fp16": 2e-3, "fp8": 1e-2, "fp32": 1e-4}


class Unsupported(Exception):
    """The candidate cannot run this shape or dtype on this device (recorded, not timed)."""


@dataclass(frozen=True)
class Shape:
    M: int
    N: int
    K: int
    dtype: str = "bf16"
    config: str | None = None  # aiter config file the shape came from
    config_row: int | None = None
    kernel_id: int | None = None  # tuned kernelId of that row, when it has one
    splitk: int | None = None
    tuner_us: float | None = None

    @property
    def label(self) -> str:
        return f"{self.M}x{self.N}x{self.K} {self.dtype}"


@dataclass(frozen=True)
class Candidate:
    name: str  # torch.linear | torch.mm | torch._scaled_mm:rowwise | aiter:gemm_a8w8_tune:<id>
    layout: str = (
        "tn"  # tn: B stored N x K (F.linear, the aiter config's layout); nn: B stored K x N
    )
    kernel_id: int | None = None


@dataclass(frozen=True)
class Policy:
    """How many samples, and when a slot counts as stable."""

    batch: int = 10  # samples per slot per round
    min_samples: int = 30  # after the discarded first batch
    max_samples: int = 150
    rel_tol: float = 0.01  # median moved less than this (relative) since the previous round
    spread_tol: float = 0.02  # and the spread moved less than this (absolute)
    max_seconds: float = 2.5  # per shape, all slots together, after which rounds stop
    discard_first: bool = True


class Timer(Protocol):
    """A prepared (candidate, regime) of one shape: operands allocated, warmed up."""

    method: str  # graph | events
    meta: dict[str, Any]  # buffers, bytes, warm-up calls, calls per graph ...

    def sample(self, n: int) -> list[float]:
        """n timings, microseconds per GEMM call."""
        ...

    def close(self) -> None: ...


class Backend(Protocol):
    def verify(self, shape: Shape, cand: Candidate) -> float:
        """Relative error of the candidate's output against the reference (raise Unsupported)."""
        ...

    def timer(self, shape: Shape, cand: Candidate, regime: str) -> Timer: ...


def rotation_count(
    set_bytes: int,
    llc_bytes: int,
    *,
    factor: float = 2.0,
    min_sets: int = 2,
    max_bytes: int | None = None,
) -> int:
    """How many operand sets the cold regime rotates through: enough that their total is at least
    `factor` times the last-level cache (so every call finds its operands evicted), at least
    `min_sets`. With `max_bytes`, never more sets than fit (but still at least min_sets)."""
    if set_bytes <= 0:
        raise ValueError(f"operand set size must be positive, got {set_bytes}")
    if llc_bytes < 0:
        raise ValueError(f"cache size must not be negative, got {llc_bytes}")
    n = max(min_sets, math.ceil(factor * llc_bytes / set_bytes) + 1)
    if max_bytes is not None:
        n = max(min_sets, min(n, max_bytes // set_bytes))
    return n


def median_spread(samples: Sequence[float]) -> tuple[float, float]:
    """Median and relative spread (p75 - p25) / median of the samples."""
    if not samples:
        raise ValueError("no samples")
    med = statistics.median(samples)
    if len(samples) < 4:
        return med, (max(samples) - min(samples)) / med if med else 0.0
    q = statistics.quantiles(samples, n=4, method="inclusive")
    return med, (q[2] - q[0]) / med if med else 0.0


@dataclass
class SlotResult:
    samples: list[float] = field(default_factory=list)
    discarded: list[float] = field(default_factory=list)
    rounds: int = 0
    stable: bool = False
    history: list[tuple[float, float]] = field(default_factory=list)  # (median, spread) per round


def interleave(
    timers: dict[Any, Timer],
    policy: Policy,
    *,
    clock: Callable[[], float] = time.monotonic,
    trace: list[Any] | None = None,
) -> dict[Any, SlotResult]:
    """Sample every slot in rounds (A B A B ...), one batch per slot per round, until each is
    stable or a bound is hit. `trace`, when given, receives the slot key of every batch taken."""
    res = {k: SlotResult() for k in timers}
    active = list(timers)
    start = clock()
    first = True
    while active:
        for k in list(active):
            got = timers[k].sample(policy.batch)
            if trace is not None:
                trace.append(k)
            r = res[k]
            if first and policy.discard_first:
                r.discarded.extend(got)
                continue
            r.samples.extend(got)
            r.rounds += 1
            med, spr = median_spread(r.samples)
            prev = r.history[-1] if r.history else None
            r.history.append((med, spr))
            if (
                len(r.samples) >= policy.min_samples
                and prev is not None
                and abs(med - prev[0]) <= policy.rel_tol * prev[0]
                and abs(spr - prev[1]) <= policy.spread_tol
            ):
                r.stable = True
            if r.stable or len(r.samples) >= policy.max_samples:
                active.remove(k)
        first = False
        if clock() - start > policy.max_seconds and all(
            len(res[k].samples) >= policy.batch for k in active
        ):
            break
    return res


@dataclass
class Measurement:
    """One (shape, candidate, regime): what goes into a harness_results row (minus roofline)."""

    shape: Shape
    candidate: Candidate
    regime: str
    status: str  # ok | verify_failed | unsupported | error
    us: float | None = None
    spread: float | None = None
    samples: int = 0
    method: str | None = None
    err: float | None = None
    note: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def verified(err: float | None, dtype: str) -> bool:
    """True when the error is a number within the dtype's tolerance (NaN never passes)."""
    return err is not None and not math.isnan(err) and err <= TOLERANCE.get(dtype, 1e-2)


def time_shape(
    shape: Shape,
    candidates: Sequence[Candidate],
    backend: Backend,
    policy: Policy = Policy(),
    regimes: Sequence[str] = REGIMES,
    trace: list[Any] | None = None,
) -> list[Measurement]:
    """Verify each candidate, then time the ones that pass in every regime, interleaved."""
    out: list[Measurement] = []
    timers: dict[tuple[str, str], Timer] = {}
    by_name = {c.name: c for c in candidates}
    errs: dict[str, float] = {}
    try:
        for c in candidates:
            try:
                err = backend.verify(shape, c)
            except Unsupported as e:
                out += [Measurement(shape, c, r, "unsupported", note=str(e)) for r in regimes]
                continue
            except Exception as e:  # a candidate that crashes must not take the run down
                out += [
                    Measurement(shape, c, r, "error", note=f"{type(e).__name__}: {e}")
                    for r in regimes
                ]
                continue
            if not verified(err, shape.dtype):
                note = (
                    f"error {err:.3g} over tolerance {TOLERANCE.get(shape.dtype, 1e-2):g}"
                    if err is not None
                    else "no output"
                )
                out += [
                    Measurement(shape, c, r, "verify_failed", err=err, note=note) for r in regimes
                ]
                continue
            errs[c.name] = err
            for r in regimes:
                try:
                    timers[(c.name, r)] = backend.timer(shape, c, r)
                except Unsupported as e:
                    out.append(Measurement(shape, c, r, "unsupported", err=err, note=str(e)))
                except Exception as e:
                    out.append(
                        Measurement(shape, c, r, "error", err=err, note=f"{type(e).__name__}: {e}")
                    )
        results = interleave(timers, policy, trace=trace) if timers else {}
        for (name, r), t in timers.items():
            sr = results[(name, r)]
            med, spr = median_spread(sr.samples)
            meta = dict(t.meta)
            meta.update(
                discarded=len(sr.discarded), rounds=sr.rounds, stable=sr.stable, batch=policy.batch
            )
            out.append(
                Measurement(
                    shape,
                    by_name[name],
                    r,
                    "ok",
                    med,
                    spr,
                    len(sr.samples),
                    t.method,
                    errs[name],
                    meta=meta,
                )
            )
    finally:
        for t in timers.values():
            t.close()
    order = {c.name: i for i, c in enumerate(candidates)}
    out.sort(key=lambda m: (order[m.candidate.name], list(regimes).index(m.regime)))
    return out
