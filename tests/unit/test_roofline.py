"""Roofline arithmetic against values worked out by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckkb.harness.roofline import (
    PEAKS,
    Ceilings,
    achieved,
    dtype_bytes,
    gemm_flops,
    gemm_min_bytes,
    match_part,
    roofline,
)


def test_flops_are_two_per_multiply_add():
    assert gemm_flops(1, 1, 1) == 2
    assert gemm_flops(8192, 8192, 8192) == 1_099_511_627_776  # 2 * 2**39
    assert gemm_flops(64, 256, 5120) == 167_772_160


def test_min_bytes_bf16_reads_a_and_b_once_writes_c_once():
    # 64x5120 A + 5120x256 B + 64x256 C, two bytes each: (327680 + 1310720 + 16384) * 2
    assert gemm_min_bytes(64, 256, 5120, "bf16") == 3_309_568


def test_min_bytes_fp8_operands_one_byte_output_separate():
    # fp8 operands 1 byte; default output bf16 (2 bytes): 16*8192 + 8192*1280 + 16*1280*2
    assert gemm_min_bytes(16, 1280, 8192, "fp8") == 131072 + 10485760 + 40960
    # an fp32 output costs 4 bytes per element
    assert gemm_min_bytes(16, 1280, 8192, "fp8", "fp32") == 131072 + 10485760 + 81920
    # bf16 operands with an fp32 output (aiter's bf16 tuned rows with outdtype float32)
    assert gemm_min_bytes(2, 3, 4, "bf16", "fp32") == (8 + 12) * 2 + 6 * 4


def test_dtype_bytes_and_unknown_dtype():
    assert [dtype_bytes(d) for d in ("fp8", "bf16", "fp16", "fp32")] == [1, 2, 2, 4]
    with pytest.raises(ValueError, match="unknown dtype"):
        dtype_bytes("int4")


def test_peaks_table_has_the_four_parts_with_dense_figures():
    assert set(PEAKS) == {"MI300X", "MI355X", "H100 SXM", "H200"}
    h200, h100 = PEAKS["H200"], PEAKS["H100 SXM"]
    assert h200.bf16_tflops == h100.bf16_tflops == 989.4  # same Hopper die, dense (sparse 1979)
    assert h200.fp8_tflops == pytest.approx(2 * h200.bf16_tflops, rel=1e-3)
    assert h200.hbm_gbps == 4800.0 and h100.hbm_gbps == 3350.0
    assert PEAKS["MI300X"].bf16_tflops == 1307.4 and PEAKS["MI300X"].hbm_gbps == 5300.0
    assert PEAKS["MI355X"].fp8_tflops == 5033.2 and PEAKS["MI355X"].hbm_gbps == 8000.0
    assert PEAKS["MI300X"].llc_bytes == PEAKS["MI355X"].llc_bytes == 256 * 2**20
    assert h100.llc_bytes == 50 * 2**20 and h200.llc_bytes == 60 * 2**20


def test_match_part_by_name_then_arch():
    assert match_part("NVIDIA H200").part == "H200"
    assert match_part("NVIDIA H100 80GB HBM3").part == "H100 SXM"
    assert match_part("AMD Instinct MI300X").part == "MI300X"
    assert match_part("", "gfx950").part == "MI355X"
    assert match_part("", "gfx942:sramecc+:xnack-").part == "MI300X"
    assert match_part("NVIDIA A100-SXM4-80GB", "sm_80") is None
    assert match_part("", "sm_90") is None  # H100 or H200: the name must say


def test_h200_ridge_point_is_about_206_flop_per_byte():
    # H200.md: the intensity below which code is memory-bound is ~206 FLOP/B in dense bf16
    p = PEAKS["H200"]
    assert p.bf16_tflops * 1e12 / (p.hbm_gbps * 1e9) == pytest.approx(206.1, abs=0.1)


def test_memory_bound_small_m_by_hand():
    c = Ceilings({"bf16": 1000.0}, 4000.0, "test")
    r = roofline(1, 8192, 8192, "bf16", c)
    # bytes: 8192*2 + 8192*8192*2 + 8192*2 = 134_250_496; at 4000 GB/s -> 33.5626 us
    assert r.bytes == 134_250_496
    assert r.t_memory_us == pytest.approx(33.562624, rel=1e-9)
    # flops 2*8192*8192 = 134_217_728; at 1000 TFLOP/s -> 0.134 us
    assert r.t_compute_us == pytest.approx(0.134217728, rel=1e-9)
    assert r.bound == "memory" and r.t_bound_us == r.t_memory_us
    a = achieved(r, 40.0)
    assert a.gbps == pytest.approx(134_250_496 / 40e-6 / 1e9)
    assert a.pct_of_bound == pytest.approx(100 * 33.562624 / 40.0)
    assert a.tflops == pytest.approx(134_217_728 / 40e-6 / 1e12)


def test_compute_bound_large_gemm_by_hand():
    c = Ceilings({"bf16": 800.0, "fp8": 1600.0}, 4000.0, "test")
    r = roofline(8192, 8192, 8192, "bf16", c)
    assert r.bound == "compute"
    assert r.t_compute_us == pytest.approx(1_099_511_627_776 / 800e12 * 1e6)  # 1374.39 us
    assert r.intensity == pytest.approx(1_099_511_627_776 / (3 * 8192 * 8192 * 2))  # 2730.67
    r8 = roofline(8192, 8192, 8192, "fp8", c)
    assert r8.t_compute_us == pytest.approx(r.t_compute_us / 2)
    assert achieved(r, 1374.389534720).pct_of_bound == pytest.approx(100.0)


def test_fp16_falls_back_to_the_bf16_ceiling_and_missing_dtype_raises():
    c = Ceilings({"bf16": 700.0}, 4000.0, "test")
    assert c.tflops("fp16") == 700.0
    with pytest.raises(KeyError):
        c.tflops("fp8")


def test_datasheet_ceilings():
    c = Ceilings.from_peaks(PEAKS["MI355X"])
    assert c.source == "datasheet:MI355X"
    assert c.tflops("fp8") == 5033.2 and c.copy_gbps == 8000.0


def test_bad_dims_and_times():
    c = Ceilings.from_peaks(PEAKS["H200"])
    with pytest.raises(ValueError, match="M must be positive"):
        roofline(0, 1, 1, "bf16", c)
    with pytest.raises(ValueError, match="K must be positive"):
        roofline(1, 1, -3, "bf16", c)
    with pytest.raises(ValueError, match="time must be positive"):
        achieved(roofline(1, 1, 1, "bf16", c), 0.0)


@given(
    st.integers(1, 1 << 16),
    st.integers(1, 1 << 16),
    st.integers(1, 1 << 16),
    st.sampled_from(["bf16", "fp16", "fp8"]),
    st.floats(0.1, 1e5),
)
def test_bound_is_the_larger_floor_and_pct_scales_inversely(M, N, K, dtype, us):
    c = Ceilings.from_peaks(PEAKS["H200"])
    r = roofline(M, N, K, dtype, c)
    assert r.t_bound_us == max(r.t_compute_us, r.t_memory_us)
    assert (r.bound == "compute") == (r.t_compute_us >= r.t_memory_us)
    a1, a2 = achieved(r, us), achieved(r, 2 * us)
    assert a1.pct_of_bound == pytest.approx(2 * a2.pct_of_bound)
    assert a1.tflops * us * 1e-6 * 1e12 == pytest.approx(r.flops)
