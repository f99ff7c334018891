"""One harness run: preflight, ceilings, every shape (twice), rows for the bundle.

`rows_for` (measurements -> harness_results rows, with the roofline) is pure and tested on the
CPU; `run_harness` needs torch and a GPU and says so in one line when either is missing.
"""

from __future__ import annotations

import datetime as _dt
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckkb.errors import CkkbError
from ckkb.harness.candidates import (
    aiter_status,
    candidates_for,
    check_shape,
    fp8_supported,
    out_dtype,
)
from ckkb.harness.roofline import Ceilings, Peaks, achieved, match_part, roofline
from ckkb.harness.timing import Backend, Measurement, Policy, Shape, time_shape
from ckkb.kb.schema.harness import HarnessCeilingRow, HarnessResultRow

if TYPE_CHECKING:  # imports torch: only where timing runs
    from ckkb.harness.torch_backend import DeviceInfo


class GpuUnavailable(CkkbError):
    exit_code = 3


def require_torch_gpu() -> Any:
    """torch and a visible GPU, or a one-line error."""
    try:
        import torch
    except ImportError:
        raise GpuUnavailable(
            "torch is not installed: the harness times GEMMs through torch",
            hint="pip install 'ckkb[gpu]' (on a host with a GPU)",
        ) from None
    if not torch.cuda.is_available():
        raise GpuUnavailable(
            "no GPU present: torch sees no CUDA or ROCm device",
            hint="run `ckkb harness` on the GPU host; CPU timings would mean nothing",
        )
    return torch


def ceilings_from(measured: list[dict[str, Any]], peaks: Peaks | None) -> Ceilings:
    """Measured ceilings where the harness took them, the data sheet for the rest."""
    gemm: dict[str, float] = {}
    copy = None
    for m in measured:
        # the best the part reached in this run: the sustained window or the short burst
        v = max(m["value"], (m.get("extra") or {}).get("burst_value") or 0.0)
        if m["what"] in (
            "copy",
            "read",
        ):  # the memory roof: the faster of a copy and a read-only stream
            copy = max(copy or 0.0, v)
        elif m["what"].startswith("gemm_"):
            gemm[m["what"][5:]] = v
    if "bf16" in gemm:
        gemm.setdefault("fp16", gemm["bf16"])
    if peaks is not None:
        for k, v in (
            ("bf16", peaks.bf16_tflops),
            ("fp16", peaks.bf16_tflops),
            ("fp8", peaks.fp8_tflops),
        ):
            gemm.setdefault(k, v)
        copy = copy or peaks.hbm_gbps
    if copy is None or not gemm:
        raise CkkbError("no ceilings: neither measured nor in the peaks table for this device")
    src = "measured" if measured else f"datasheet:{peaks.part if peaks else '?'}"
    return Ceilings(gemm, copy, src)


def rows_for(
    ms: Sequence[Measurement],
    *,
    run_id: str,
    device: str,
    arch: str,
    ceilings: Ceilings,
    peaks: Peaks | None,
    pass_no: int,
    common: dict[str, Any],
) -> list[HarnessResultRow]:
    out = []
    for m in ms:
        s = m.shape
        extra = dict(common)
        extra.update(m.meta)
        extra["ceilings"] = {
            "source": ceilings.source,
            "tflops": ceilings.tflops(s.dtype),
            "gbps": ceilings.copy_gbps,
        }
        if m.note:
            extra["note"] = m.note
        if s.tuner_us is not None:
            extra["tuner_us"] = s.tuner_us
        tflops = gbps = pct = None
        r = roofline(s.M, s.N, s.K, s.dtype, ceilings, out_dtype(s))
        extra["roofline"] = {
            "flops": r.flops,
            "bytes": r.bytes,
            "t_compute_us": r.t_compute_us,
            "t_memory_us": r.t_memory_us,
            "intensity": r.intensity,
        }
        if m.status == "ok" and m.us:
            a = achieved(r, m.us)
            tflops, gbps, pct = a.tflops, a.gbps, a.pct_of_bound
            if peaks is not None:
                rp = roofline(s.M, s.N, s.K, s.dtype, Ceilings.from_peaks(peaks), out_dtype(s))
                extra["pct_of_datasheet_bound"] = achieved(rp, m.us).pct_of_bound
        out.append(
            HarnessResultRow(
                run_id=run_id,
                device=device,
                arch=arch,
                part=peaks.part if peaks else None,
                M=s.M,
                N=s.N,
                K=s.K,
                dtype=s.dtype,
                out_dtype=out_dtype(s),
                layout=m.candidate.layout,
                regime=m.regime,
                candidate=m.candidate.name,
                kernel_id=m.candidate.kernel_id,
                status=m.status,
                us=m.us,
                spread=m.spread,
                samples=m.samples or None,
                method=m.method,
                tflops=tflops,
                gbps=gbps,
                bound=r.bound,
                pct_of_bound=pct,
                err=m.err,
                pass_no=pass_no,
                config=s.config,
                config_row=s.config_row,
                extra=extra,
            )
        )
    return out


@dataclass
class RunResult:
    created: str
    host: dict[str, Any]
    results: list[HarnessResultRow]
    ceilings: list[HarnessCeilingRow]
    notes: list[str]


def preflight(shapes: Sequence[Shape]) -> DeviceInfo:
    """Everything that can be refused before any timing starts: bad shapes, no torch, no GPU, a
    dtype the device cannot run. Returns the device info."""
    if not shapes:
        raise CkkbError("no shapes to time")
    for s in shapes:
        try:
            check_shape(s)
        except ValueError as e:
            raise CkkbError(str(e)) from None
    require_torch_gpu()
    from ckkb.harness import torch_backend as tb

    dev = tb.device_info()
    if any(s.dtype == "fp8" for s in shapes) and not fp8_supported(dev.arch):
        raise CkkbError(
            f"fp8 is not supported on {dev.name} ({dev.arch})",
            hint="drop fp8 from --dtype (fp8 needs sm_89+ or gfx942/gfx950)",
        )
    return dev


def run_harness(
    shapes: Sequence[Shape],
    *,
    passes: int = 2,
    policy: Policy | None = None,
    progress: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    measure_ceiling: bool = True,
    dev: DeviceInfo | None = None,
) -> RunResult:
    if dev is None:
        dev = preflight(shapes)
    from ckkb.harness import torch_backend as tb

    notes: list[str] = []
    ast = aiter_status()
    notes.append(ast.message)
    peaks = match_part(dev.name, dev.arch)
    created = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    run_id = f"{created}@{platform.node() or 'host'}"
    policy = policy or Policy()
    total = len(shapes) * passes + (1 if measure_ceiling else 0)
    if on_start:
        on_start(total)
    measured: list[dict[str, Any]] = []
    if measure_ceiling:
        measured = tb.measure_ceilings(
            dev, fp8=any(s.dtype == "fp8" for s in shapes) or fp8_supported(dev.arch)
        )
        if progress:
            progress("ceilings")
    ceil = ceilings_from(measured, peaks)
    common = common_extra(dev, policy, ast.message)
    backend = tb.TorchBackend(dev)
    results: list[HarnessResultRow] = []
    for p in range(1, passes + 1):
        for s in shapes:
            results += time_one(
                s,
                p,
                backend=backend,
                policy=policy,
                aiter=ast.available,
                run_id=run_id,
                dev=dev,
                ceilings=ceil,
                peaks=peaks,
                common=common,
            )
            if progress:
                progress(f"pass {p} {s.label}")
    host = dev.host()
    host["clocks_end"] = tb.read_clocks()
    host["platform"] = platform.platform()
    ceil_rows = ceiling_rows(run_id, dev, measured)
    return RunResult(created, host, results, ceil_rows, notes)


def common_extra(dev: DeviceInfo, policy: Policy, aiter_message: str) -> dict[str, Any]:
    """The methodology every result row of a run carries in `extra`."""
    from ckkb.harness import torch_backend as tb

    return {
        "torch": dev.torch_version,
        "runtime": dev.runtime,
        "clocks_start": dev.clocks,
        "llc_bytes": dev.llc_bytes,
        "llc_source": dev.llc_source,
        "policy": {
            "batch": policy.batch,
            "min_samples": policy.min_samples,
            "max_samples": policy.max_samples,
            "rel_tol": policy.rel_tol,
            "spread_tol": policy.spread_tol,
            "max_seconds": policy.max_seconds,
        },
        "graph_below_us": tb.TorchTimer.GRAPH_BELOW_US,
        "warmup_min_calls": tb.TorchTimer.WARMUP_MIN_CALLS,
        "warmup_min_us": tb.TorchTimer.WARMUP_MIN_US,
        "aiter": aiter_message,
    }


def time_one(
    s: Shape,
    pass_no: int,
    *,
    backend: Backend,
    policy: Policy,
    aiter: bool,
    run_id: str,
    dev: DeviceInfo,
    ceilings: Ceilings,
    peaks: Peaks | None,
    common: dict[str, Any],
) -> list[HarnessResultRow]:
    """One shape, one pass: every candidate in both regimes, as rows. A shape's failure (out of
    memory, an exception in a candidate) is recorded in its rows; it never stops the run."""
    import torch

    from ckkb.harness import torch_backend as tb

    cands = candidates_for(s, aiter=aiter)
    try:
        ms = time_shape(s, cands, backend, policy)
    except torch.cuda.OutOfMemoryError as e:
        ms = [
            Measurement(s, c, r, "error", note=f"out of memory: {str(e).splitlines()[0]}")
            for c in cands
            for r in ("warm", "cold")
        ]
        torch.cuda.empty_cache()
    except Exception as e:  # one shape's failure is recorded; the run goes on
        first = (str(e).splitlines() or [""])[0]
        ms = [
            Measurement(s, c, r, "error", note=f"{type(e).__name__}: {first}")
            for c in cands
            for r in ("warm", "cold")
        ]
    clk = tb.read_clocks()
    shape_common = dict(common, sm_mhz_after=clk.get("sm_mhz"), temp_c_after=clk.get("temp_c"))
    rows = rows_for(
        ms,
        run_id=run_id,
        device=dev.name,
        arch=dev.arch,
        ceilings=ceilings,
        peaks=peaks,
        pass_no=pass_no,
        common=shape_common,
    )
    torch.cuda.empty_cache()
    return rows


def ceiling_rows(
    run_id: str, dev: DeviceInfo, measured: list[dict[str, Any]]
) -> list[HarnessCeilingRow]:
    return [
        HarnessCeilingRow(
            run_id=run_id,
            device=dev.name,
            arch=dev.arch,
            what=m["what"],
            size=m["size"],
            us=m["us"],
            value=m["value"],
            unit=m["unit"],
            do_bench_us=m["do_bench_us"],
            ratio=m["ratio"],
            extra=m["extra"],
        )
        for m in measured
    ]
