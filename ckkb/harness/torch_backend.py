"""The device side of the harness, on torch (CUDA or ROCm). Imported only when timing on a GPU.

Timers use device events. Small calls are timed as graphs of many back-to-back calls (launch
overhead would otherwise dominate: the seed's micro-benchmark recipe); large ones with events
around every call. Each Timer records which method produced its numbers.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ckkb.harness import candidates as cands
from ckkb.harness.roofline import match_part
from ckkb.harness.timing import Candidate, Shape, Unsupported, rotation_count


@dataclass
class DeviceInfo:
    name: str
    arch: str
    llc_bytes: int
    llc_source: str
    sm_count: int
    total_memory: int
    torch_version: str
    runtime: str  # cuda X | hip X
    clocks: dict[str, Any] = field(default_factory=dict)

    def host(self) -> dict[str, Any]:
        return {
            "hostname": platform.node(),
            "device": self.name,
            "arch": self.arch,
            "torch": self.torch_version,
            "runtime": self.runtime,
            "sm_count": self.sm_count,
            "total_memory": self.total_memory,
            "llc_bytes": self.llc_bytes,
            "llc_source": self.llc_source,
            "clocks": self.clocks,
        }


def read_clocks() -> dict[str, Any]:
    """SM and memory clocks (current and max) through NVML where it is there; {} otherwise."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(
            int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
        )
        out = {
            "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "sm_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
        }
        try:
            out["power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
            out["temp_c"] = pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
        except Exception:
            pass
        return out
    except Exception:
        return {}


def device_info() -> DeviceInfo:
    if not torch.cuda.is_available():
        raise RuntimeError("no GPU visible to torch")
    p = torch.cuda.get_device_properties(0)
    hip = getattr(torch.version, "hip", None)
    if hip:
        arch = getattr(p, "gcnArchName", "gfx").split(":")[0]
        runtime = f"hip {hip}"
    else:
        arch = f"sm_{p.major}{p.minor}"
        runtime = f"cuda {torch.version.cuda}"
    l2 = int(getattr(p, "L2_cache_size", 0) or 0)
    llc, src = l2, "torch.cuda.get_device_properties(0).L2_cache_size"
    part = match_part(p.name, arch)
    if part is not None and part.llc_bytes > llc:  # ROCm reports the L2, not the MALL
        llc, src = part.llc_bytes, f"peaks table: {part.part} {part.llc_name}"
    return DeviceInfo(
        p.name,
        arch,
        llc,
        src,
        p.multi_processor_count,
        p.total_memory,
        torch.__version__,
        runtime,
        read_clocks(),
    )


def _events(n: int) -> list[tuple[Any, Any]]:
    return [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(n)
    ]


def time_events(fn: Callable[[], Any], n: int, per: int = 1) -> list[float]:
    """n samples of fn() with device events around each, microseconds per call (fn does `per`)."""
    ev = _events(n)
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1000.0 / per for s, e in ev]


class TorchTimer:
    """One (shape, candidate, regime), operands allocated, warmed up, ready to sample."""

    GRAPH_BELOW_US = 200.0  # per-call estimate under which graphs of many calls are timed
    GRAPH_TARGET_US = 2000.0  # aim for replays of about this long
    WARMUP_MIN_CALLS = 3
    WARMUP_MIN_US = 20000.0

    def __init__(
        self,
        shape: Shape,
        cand: Candidate,
        regime: str,
        dev: DeviceInfo,
        *,
        rotate_factor: float = 2.0,
        mem_fraction: float = 0.5,
    ):
        self.regime = regime
        self.call = cands.make_call(cand, shape)
        first = cands.make_operands(shape, cand, dev.arch)
        set_bytes = sum(t.numel() * t.element_size() for k, t in first.items() if k in ("a", "b"))
        if regime == "cold":
            free, _total = torch.cuda.mem_get_info()
            n = rotation_count(
                set_bytes, dev.llc_bytes, factor=rotate_factor, max_bytes=int(free * mem_fraction)
            )
            self.sets = [first] + [cands.make_operands(shape, cand, dev.arch) for _ in range(n - 1)]
        else:
            self.sets = [first]
        self.i = 0
        # Warm-up: the first call (which pays any compilation / handle creation) and more until
        # both a minimum count and a minimum time have passed; all discarded.
        calls = 0
        torch.cuda.synchronize()
        for o in self.sets:
            self.call(o)
            calls += 1
        est = statistics.median(time_events(lambda: self._next(), 5))
        calls += 5
        more = max(self.WARMUP_MIN_CALLS, int(self.WARMUP_MIN_US / max(est, 1.0)))
        more = min(more, 2000)
        for _ in range(more):
            self._next()
        calls += more
        torch.cuda.synchronize()
        est = statistics.median(time_events(lambda: self._next(), 5))
        calls += 5
        self.graph = None
        self.per = 1
        if est < self.GRAPH_BELOW_US:
            per = max(10, math.ceil(self.GRAPH_TARGET_US / max(est, 0.5)))
            per = min(per, 2000)
            if regime == "cold":
                per = max(per, len(self.sets))
            self.per = per
            self.graph = self._capture(per)
            self.graph.replay()  # first replay discarded
            torch.cuda.synchronize()
            self.method = "graph"
        else:
            self.method = "events"
        self.meta = {
            "buffers": len(self.sets),
            "set_bytes": set_bytes,
            "buffer_bytes": set_bytes * len(self.sets),
            "llc_bytes": dev.llc_bytes,
            "warmup_calls": calls,
            "calls_per_sample": self.per,
            "estimate_us": est,
        }

    def _next(self) -> Any:
        o = self.sets[self.i]
        if self.regime == "cold":
            self.i = (self.i + 1) % len(self.sets)
        return self.call(o)

    def _capture(self, per: int) -> Any:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self._next()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            for _ in range(per):
                self._next()
        torch.cuda.synchronize()
        return g

    def sample(self, n: int) -> list[float]:
        if self.graph is not None:
            self.graph.replay()  # prime: leaves the cache as this regime finds it
            return time_events(self.graph.replay, n, self.per)
        self._next()  # prime, untimed
        return time_events(self._next, n)

    def close(self) -> None:
        self.graph = None
        self.sets = []


class TorchBackend:
    def __init__(self, dev: DeviceInfo, *, rotate_factor: float = 2.0):
        self.dev = dev
        self.rotate_factor = rotate_factor

    def verify(self, shape: Shape, cand: Candidate) -> float:
        if shape.dtype == "fp8" and not cands.fp8_supported(self.dev.arch):
            raise Unsupported(f"fp8 is not supported on {self.dev.name} ({self.dev.arch})")
        torch.manual_seed(shape.M * 1_000_003 + shape.N * 1009 + shape.K)
        ops = cands.make_operands(shape, cand, self.dev.arch)
        call = cands.make_call(cand, shape)
        out = call(ops)
        a32, w32 = ops["ref"]()
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            ref = a32 @ w32.t()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev
        if tuple(out.shape) != (shape.M, shape.N):
            return float("nan")
        o = out.float()
        if not torch.isfinite(o).all():
            return float("nan")
        denom = torch.linalg.vector_norm(ref).item()
        err = torch.linalg.vector_norm(o - ref).item() / (denom or 1.0)
        del ops, out, ref, a32, w32, o
        return err

    def timer(self, shape: Shape, cand: Candidate, regime: str) -> TorchTimer:
        return TorchTimer(shape, cand, regime, self.dev, rotate_factor=self.rotate_factor)


# ----- ceilings and the do_bench cross-check ---------------------------------------------------


def _median(fn: Callable[[], Any], n: int = 30, warm: int = 5) -> tuple[float, float]:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    xs = time_events(fn, n)
    med = statistics.median(xs)
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return med, (q[2] - q[0]) / med


def _do_bench(fn: Callable[[], Any], rep_ms: int) -> float | None:
    try:
        import triton.testing
    except Exception:
        return None
    return float(triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median")) * 1000.0


def compare_with_do_bench(
    fn: Callable[[], Any], *, settle_ms: float = 1000.0, window_ms: int = 300, rounds: int = 2
) -> dict[str, Any]:
    """Time fn with the harness's events and with triton.testing.do_bench over the same window,
    alternating (harness, do_bench, harness, do_bench), after the clocks have settled.

    A short burst right after a warm-up runs at boost clocks; a GEMM held for hundreds of
    milliseconds runs at the clock the power limit allows. do_bench times a window of `rep`
    milliseconds, so the harness is compared over a window of the same length. The burst figure
    (30 calls after 5 warm-ups) is kept too: per-shape timings are short bursts."""
    burst, burst_spread = _median(fn, 30, 5)
    n_settle = max(5, int(settle_ms * 1000.0 / max(burst, 1.0)))
    for _ in range(n_settle):
        fn()
    torch.cuda.synchronize()
    n = max(30, int(window_ms * 1000.0 / max(burst, 1.0)))
    h: list[float] = []
    d: list[float] = []
    spreads: list[float] = []
    clocks: list[Any] = []
    for _ in range(rounds):
        xs = time_events(fn, n)
        med = statistics.median(xs)
        q = statistics.quantiles(xs, n=4, method="inclusive")
        h.append(med)
        spreads.append((q[2] - q[0]) / med)
        db = _do_bench(fn, window_ms)
        if db is not None:
            d.append(db)
        clocks.append(read_clocks().get("sm_mhz"))
    us = statistics.median(h)
    db_us = statistics.median(d) if d else None
    return {
        "us": us,
        "do_bench_us": db_us,
        "ratio": (us / db_us) if db_us else None,
        "extra": {
            "method": "events",
            "samples_per_round": n,
            "rounds": rounds,
            "harness_rounds_us": h,
            "do_bench_rounds_us": d,
            "spread": max(spreads),
            "settle_calls": n_settle,
            "window_ms": window_ms,
            "do_bench": (
                f"triton.testing.do_bench(warmup=25, rep={window_ms}, return_mode='median')"
            ),
            "burst_us": burst,
            "burst_spread": burst_spread,
            "sm_mhz_after_rounds": clocks,
        },
    }


def _copy_ceiling(copy_bytes: int) -> dict[str, Any]:
    src = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)

    def copy() -> None:
        dst.copy_(src)

    r = compare_with_do_bench(copy)
    r["extra"].update(
        bytes_counted="read + written",
        burst_value=2 * copy_bytes / (r["extra"]["burst_us"] * 1e-6) / 1e9,
    )
    return {
        "what": "copy",
        "size": f"{copy_bytes}",
        "value": 2 * copy_bytes / (r["us"] * 1e-6) / 1e9,
        "unit": "GB/s",
        **r,
    }


def _read_ceiling(read_bytes: int) -> dict[str, Any]:
    """A read-only stream (a sum over a large bf16 tensor): what a GEMV-like, read-dominated GEMM
    can reach, which a copy (half reads, half writes) understates."""
    x = torch.randn(read_bytes // 2, dtype=torch.bfloat16, device="cuda")

    def read() -> None:
        x.sum()

    r = compare_with_do_bench(read)
    r["extra"].update(
        bytes_counted="read", burst_value=read_bytes / (r["extra"]["burst_us"] * 1e-6) / 1e9
    )
    return {
        "what": "read",
        "size": f"{read_bytes}",
        "value": read_bytes / (r["us"] * 1e-6) / 1e9,
        "unit": "GB/s",
        **r,
    }


def _gemm_ceiling(gemm: int) -> dict[str, Any]:
    torch.manual_seed(0)
    a = torch.randn(gemm, gemm, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(gemm, gemm, device="cuda", dtype=torch.bfloat16)

    def mm() -> None:
        torch.mm(a, b)

    r = compare_with_do_bench(mm)
    flops = 2 * gemm**3
    r["extra"].update(data="randn", burst_value=flops / (r["extra"]["burst_us"] * 1e-6) / 1e12)
    return {
        "what": "gemm_bf16",
        "size": f"{gemm}x{gemm}x{gemm}",
        "value": flops / (r["us"] * 1e-6) / 1e12,
        "unit": "TFLOP/s",
        **r,
    }


def measure_ceilings(
    dev: DeviceInfo, *, copy_bytes: int = 2 << 30, gemm: int = 8192, fp8: bool = True
) -> list[dict[str, Any]]:
    """A large device copy, a large read-only stream and a large GEMM (bf16, and fp8 where
    supported), each timed by the harness (events, median) and by triton.testing.do_bench in the
    same run."""
    out: list[dict[str, Any]] = [
        _copy_ceiling(copy_bytes),
        _read_ceiling(copy_bytes),
        _gemm_ceiling(gemm),
    ]
    flops = 2 * gemm**3
    if fp8 and cands.fp8_supported(dev.arch):
        shape = Shape(gemm, gemm, gemm, "fp8")
        cand = Candidate("torch._scaled_mm:tensorwise", "tn")
        ops = cands.make_operands(shape, cand, dev.arch)
        call = cands.make_call(cand, shape)

        def mm8() -> None:
            call(ops)

        r = compare_with_do_bench(mm8)
        r["extra"].update(
            data="randn, tensorwise scales",
            burst_value=flops / (r["extra"]["burst_us"] * 1e-6) / 1e12,
        )
        out.append(
            {
                "what": "gemm_fp8",
                "size": f"{gemm}x{gemm}x{gemm}",
                "value": flops / (r["us"] * 1e-6) / 1e12,
                "unit": "TFLOP/s",
                **r,
            }
        )
        del ops
    torch.cuda.empty_cache()
    return out
