"""Tables for the harness part of the knowledge base (declared with @table; see base.py).

`ckkb harness` writes a JSON-lines bundle (`ckkb.harness.bundle`); `ckkb ingest` stores each
record whose `record` field names one of these tables, column by column. The aiter audit reads
`harness_results` for baselines; the web UI serves the `tuner_vs_cold` canned query over it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ckkb.kb.schema.base import INGESTED, col, table


@table(
    "harness_results",
    "GEMM timings taken by `ckkb harness`: one row per (shape, dtype, regime, candidate, pass), "
    "warm (one operand set, like the tuners) or cold (operand sets rotated past the last-level "
    "cache), with the roofline bound and how the number was taken.",
    kind=INGESTED,
    indexes=(("M", "N", "K"), ("arch",), ("regime",)),
)
@dataclass(kw_only=True, slots=True)
class HarnessResultRow:
    if TYPE_CHECKING:  # @table sets it at run time; not a dataclass field
        __table__: ClassVar[str]

    run_id: str = col(
        "id of the harness run (bundle creation time and host); rows of one run share it"
    )
    device: str = col("device name as the runtime reports it, e.g. `NVIDIA H200`")
    arch: str = col("gfx arch on ROCm (e.g. gfx942), `sm_90` style compute capability on CUDA")
    part: str | None = col(
        "part of the roofline peaks table the device matched (H200, MI300X, ...), if any", None
    )
    M: int = col("rows of A and C")
    N: int = col("columns of B and C")
    K: int = col("reduction dimension")
    dtype: str = col("operand dtype: bf16 | fp16 | fp8")
    out_dtype: str = col("output dtype: bf16 | fp16 | fp32")
    layout: str = col(
        "operand layout the candidate was called with: `tn` "
        "(B stored N x K, F.linear) or `nn` (B stored K x N)"
    )
    regime: str = col(
        "warm (one operand set) | cold (operand sets rotated past the last-level cache)"
    )
    candidate: str = col(
        "what was timed: torch.linear, torch.mm, torch._scaled_mm, aiter:<op>:<kernelId>"
    )
    kernel_id: int | None = col(
        "aiter kernelId of the tuned row for aiter candidates (0 = the incumbent default)", None
    )
    status: str = col("ok | verify_failed (output wrong; not timed) | unsupported | error")
    us: float | None = col("median time per GEMM call, microseconds", None)
    spread: float | None = col("relative spread of the samples: (p75 - p25) / median", None)
    samples: int | None = col("number of timed samples behind the median", None)
    method: str | None = col(
        "graph (CUDA/HIP graph of many back-to-back "
        "calls) | events (device events around each call)",
        None,
    )
    tflops: float | None = col("achieved TFLOP/s: 2*M*N*K / us", None)
    gbps: float | None = col(
        "achieved GB/s over the minimum bytes (A, B read once, C written once)", None
    )
    bound: str | None = col("memory | compute: which roofline term is larger for this shape", None)
    pct_of_bound: float | None = col(
        "roofline time over measured time, percent (100 = at the ceiling)", None
    )
    err: float | None = col(
        "verification error ||out - ref|| / ||ref|| against an fp32 reference", None
    )
    pass_no: int = col(
        "which pass over the whole shape set (the set is run twice to measure run-to-run spread)", 1
    )
    config: str | None = col(
        "aiter config file the shape came from (repo-style path), if any", None
    )
    config_row: int | None = col("1-based data row in that config file", None)
    extra: dict[str, Any] = col(
        "the rest of the methodology: torch version, clocks, buffer "
        "count and bytes, warm-up, repetitions, ceilings used",
        {},
        json=True,
    )


@table(
    "harness_ceilings",
    "Ceilings measured by `ckkb harness` on the host (a large "
    "device copy, a read-only stream, a large GEMM) and the "
    "same operations timed by `triton.testing.do_bench` in the same run, as a cross-check.",
    kind=INGESTED,
)
@dataclass(kw_only=True, slots=True)
class HarnessCeilingRow:
    if TYPE_CHECKING:  # @table sets it at run time; not a dataclass field
        __table__: ClassVar[str]

    run_id: str = col("id of the harness run; matches harness_results.run_id")
    device: str = col("device name")
    arch: str = col("gfx arch or sm_XY compute capability")
    what: str = col(
        "copy (device-to-device copy) | read (read-only stream: "
        "a sum) | gemm_bf16 | gemm_fp8 (8192^3 by default)"
    )
    size: str = col("operation size: bytes copied, or MxNxK")
    us: float = col("harness median time, microseconds (device events)")
    value: float = col(
        "GB/s (copy: read + written; read: read) or TFLOP/s (GEMMs), from the harness time"
    )
    unit: str = col("GB/s | TFLOP/s")
    do_bench_us: float | None = col(
        "triton.testing.do_bench median for the same operation, microseconds", None
    )
    ratio: float | None = col("harness us / do_bench us", None)
    extra: dict[str, Any] = col("samples, spread, method", {}, json=True)
