"""Roofline arithmetic for one GEMM: FLOPs, minimum bytes, peaks per part, bound, percent of bound.

Pure Python (no torch): the harness calls it with measured times; tests call it with hand values.
"""

from __future__ import annotations

from dataclasses import dataclass

# Bytes per element of each dtype name the harness uses.
DTYPE_BYTES: dict[str, int] = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4}


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPE_BYTES)})") from None


def gemm_flops(M: int, N: int, K: int) -> int:
    """Multiply-adds counted as two operations: 2*M*N*K."""
    return 2 * M * N * K


def gemm_min_bytes(M: int, N: int, K: int, dtype: str, out_dtype: str | None = None) -> int:
    """The fewest bytes a GEMM must move through device memory: A (MxK) and B (KxN) read once,
    C (MxN) written once. Operands in `dtype`; the output in `out_dtype` (default: the operand
    dtype, except fp8 whose output defaults to bf16). Scales of scaled fp8 GEMMs are ignored
    (M + N floats: negligible)."""
    if out_dtype is None:
        out_dtype = "bf16" if dtype == "fp8" else dtype
    a = dtype_bytes(dtype)
    return M * K * a + K * N * a + M * N * dtype_bytes(out_dtype)


@dataclass(frozen=True)
class Peaks:
    """Dense (no sparsity) matrix rates and HBM bandwidth of one part."""

    part: str
    bf16_tflops: float  # fp16 is the same on every part listed
    fp8_tflops: float
    hbm_gbps: float  # GB/s, 1 GB = 1e9 bytes
    llc_bytes: (
        int  # last-level cache a cold regime must exceed (L2 on NVIDIA, MALL/Infinity Cache on AMD)
    )
    llc_name: str

    def tflops(self, dtype: str) -> float:
        return self.fp8_tflops if dtype == "fp8" else self.bf16_tflops


MB = 1024 * 1024

# Vendor data sheets; dense rates (the sheets' "with sparsity" figures are twice these).
PEAKS: dict[str, Peaks] = {
    # AMD Instinct MI300X data sheet (amd.com, "AMD Instinct MI300X Accelerator"): peak BF16/FP16
    # 1307.4 TFLOPS dense, FP8 2614.9 TFLOPS dense, 5.3 TB/s HBM3, 256 MB AMD Infinity Cache.
    "MI300X": Peaks("MI300X", 1307.4, 2614.9, 5300.0, 256 * MB, "MALL (Infinity Cache)"),
    # AMD Instinct MI355X data sheet (amd.com, "AMD Instinct MI355X GPU"): peak BF16/FP16
    # 2516.6 TFLOPS dense, FP8 5033.2 TFLOPS dense, 8 TB/s HBM3E, 256 MB AMD Infinity Cache.
    "MI355X": Peaks("MI355X", 2516.6, 5033.2, 8000.0, 256 * MB, "MALL (Infinity Cache)"),
    # NVIDIA H100 Tensor Core GPU data sheet, SXM column: BF16 1979 TFLOPS and FP8 3958 TFLOPS
    # "with sparsity" (dense: half), 3.35 TB/s HBM3; 50 MB L2 (NVIDIA Hopper architecture
    # whitepaper).
    "H100 SXM": Peaks("H100 SXM", 989.4, 1978.9, 3350.0, 50 * MB, "L2"),
    # NVIDIA H200 Tensor Core GPU data sheet, SXM column: BF16 1979 TFLOPS and FP8 3958 TFLOPS
    # "with sparsity" (dense: half, the same as H100), 4.8 TB/s HBM3e, 141 GB; 60 MB L2 as the
    # runtime reports it (torch.cuda.get_device_properties(0).L2_cache_size on an H200 here).
    "H200": Peaks("H200", 989.4, 1978.9, 4800.0, 60 * MB, "L2"),
}

# Archs to parts, for the last-level-cache table when the runtime cannot tell (ROCm reports the
# per-XCD L2 as L2_cache_size, not the MALL that actually serves a cold-vs-warm difference).
ARCH_PART: dict[str, str] = {"gfx942": "MI300X", "gfx950": "MI355X", "sm_90": "H200"}


def match_part(device_name: str, arch: str | None = None) -> Peaks | None:
    """The peaks-table entry for a device name (and arch as a fallback), or None."""
    name = (device_name or "").upper()
    if "H200" in name:
        return PEAKS["H200"]
    if "H100" in name:
        return PEAKS["H100 SXM"]
    if "MI355" in name or "MI350" in name:
        return PEAKS["MI355X"]
    if "MI300X" in name or "MI325" in name:
        return PEAKS["MI300X"]
    part = ARCH_PART.get((arch or "").split(":")[0])
    if part and part != "H200":  # sm_90 alone does not tell an H100 from an H200
        return PEAKS[part]
    return None


@dataclass(frozen=True)
class Ceilings:
    """What the roofline is drawn against: measured on the host, else the data sheet."""

    gemm_tflops: dict[str, float]  # dtype -> TFLOP/s
    copy_gbps: float
    source: str  # "measured" | "datasheet:<part>"

    def tflops(self, dtype: str) -> float:
        if dtype in self.gemm_tflops:
            return self.gemm_tflops[dtype]
        if dtype == "fp16" and "bf16" in self.gemm_tflops:
            return self.gemm_tflops["bf16"]
        raise KeyError(f"no GEMM ceiling for {dtype}")

    @classmethod
    def from_peaks(cls, p: Peaks) -> Ceilings:
        return cls(
            {"bf16": p.bf16_tflops, "fp16": p.bf16_tflops, "fp8": p.fp8_tflops},
            p.hbm_gbps,
            f"datasheet:{p.part}",
        )


@dataclass(frozen=True)
class Roofline:
    flops: int
    bytes: int
    t_compute_us: float
    t_memory_us: float
    bound: str  # memory | compute
    t_bound_us: float
    intensity: float  # FLOP per byte


def roofline(
    M: int, N: int, K: int, dtype: str, ceilings: Ceilings, out_dtype: str | None = None
) -> Roofline:
    """The two floors of one GEMM against the given ceilings; the larger one is the bound."""
    for name, v in (("M", M), ("N", N), ("K", K)):
        if v <= 0:
            raise ValueError(f"{name} must be positive, got {v}")
    f = gemm_flops(M, N, K)
    b = gemm_min_bytes(M, N, K, dtype, out_dtype)
    t_c = f / (ceilings.tflops(dtype) * 1e12) * 1e6
    t_m = b / (ceilings.copy_gbps * 1e9) * 1e6
    bound = "compute" if t_c >= t_m else "memory"
    return Roofline(f, b, t_c, t_m, bound, max(t_c, t_m), f / b)


@dataclass(frozen=True)
class Achieved:
    tflops: float
    gbps: float
    pct_of_bound: float


def achieved(r: Roofline, us: float) -> Achieved:
    """Rates reached in `us` microseconds, and the roofline time as a percent of it."""
    if us <= 0:
        raise ValueError(f"time must be positive, got {us}")
    return Achieved(
        r.flops / (us * 1e-6) / 1e12, r.bytes / (us * 1e-6) / 1e9, 100.0 * r.t_bound_us / us
    )
