"""Scheduling, statistics, rotation sizing and verification of the harness, with fake timers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckkb.harness.candidates import candidates_for, check_shape, fp8_supported
from ckkb.harness.roofline import PEAKS
from ckkb.harness.run import ceilings_from, rows_for
from ckkb.harness.timing import (
    TOLERANCE,
    Candidate,
    Policy,
    Shape,
    Unsupported,
    interleave,
    median_spread,
    rotation_count,
    time_shape,
    verified,
)

MB = 2**20


# ----- rotation sizing ----------------------------------------------------------------------------


def test_rotation_exceeds_the_last_level_cache():
    # 1 MiB sets against a 60 MiB L2 (H200): at least 2 x 60 MiB of sets, plus the one in use
    assert rotation_count(1 * MB, 60 * MB) == 121
    # 256 MiB MALL (MI300X): 12.7 MiB sets -> ceil(2 * 256 / 12.7) + 1
    assert rotation_count(int(12.7 * MB), 256 * MB) == math.ceil(2 * 256 * MB / int(12.7 * MB)) + 1
    # a set larger than twice the cache still rotates between two
    assert rotation_count(384 * MB, 60 * MB) == 2
    assert rotation_count(41 * MB, 60 * MB, factor=1.0) == 3


def test_rotation_respects_memory_cap_but_never_below_two():
    assert rotation_count(1 * MB, 60 * MB, max_bytes=10 * MB) == 10
    assert rotation_count(100 * MB, 60 * MB, max_bytes=10 * MB) == 2


def test_rotation_rejects_nonsense():
    with pytest.raises(ValueError):
        rotation_count(0, 60 * MB)
    with pytest.raises(ValueError):
        rotation_count(1, -1)


@given(st.integers(1, 1 << 34), st.integers(0, 1 << 30), st.floats(1.0, 4.0))
def test_rotation_total_always_exceeds_factor_times_cache(set_bytes, llc, factor):
    n = rotation_count(set_bytes, llc, factor=factor)
    assert n >= 2
    assert n * set_bytes > factor * llc
    # and not wastefully more than one set beyond what is needed
    assert (n - 2) * set_bytes <= factor * llc or n == 2


# ----- statistics -------------------------------------------------------------------------------


def test_median_and_relative_interquartile_spread():
    med, spr = median_spread([10.0, 10.0, 10.0, 10.0])
    assert (med, spr) == (10.0, 0.0)
    med, spr = median_spread([9.0, 10.0, 11.0, 12.0, 100.0])
    assert med == 11.0
    assert spr == pytest.approx((12.0 - 10.0) / 11.0)  # inclusive quartiles: 10 and 12
    with pytest.raises(ValueError):
        median_spread([])


# ----- interleaving -----------------------------------------------------------------------------


class SeqTimer:
    """Returns values from a list, in order, one per sample; records every call."""

    method = "graph"

    def __init__(self, name, values, log):
        self.name, self.values, self.log = name, list(values), log
        self.meta = {"buffers": 1}
        self.closed = False

    def sample(self, n):
        self.log.append((self.name, n))
        out = [self.values[min(i, len(self.values) - 1)] for i in range(n)]
        self.values = self.values[n:] or self.values[-1:]
        return out

    def close(self):
        self.closed = True


def test_slots_are_sampled_abab_not_all_a_then_all_b():
    log = []
    timers = {"A": SeqTimer("A", [1.0], log), "B": SeqTimer("B", [2.0], log)}
    trace = []
    res = interleave(timers, Policy(batch=5, min_samples=10), trace=trace)
    assert trace[:6] == ["A", "B", "A", "B", "A", "B"]
    # never two batches of one slot in a row while the other is still active
    assert all(trace[i] != trace[i + 1] for i in range(len(trace) - 1))
    assert res["A"].stable and res["B"].stable
    assert statistics_of(res["A"]) == 1.0 and statistics_of(res["B"]) == 2.0


def statistics_of(r):
    return median_spread(r.samples)[0]


def test_first_batch_is_discarded():
    log = []
    # the first 5 samples carry a compilation-sized outlier; they must not reach the median
    t = SeqTimer("A", [500.0] * 5 + [10.0] * 200, log)
    res = interleave({"A": t}, Policy(batch=5, min_samples=10))
    assert res["A"].discarded == [500.0] * 5
    assert 500.0 not in res["A"].samples
    assert median_spread(res["A"].samples)[0] == 10.0


def test_unstable_slot_is_bounded_by_max_samples():
    log = []
    # a median that keeps drifting never counts as stable
    drifting = [float(i) for i in range(1, 10_000)]
    res = interleave(
        {"A": SeqTimer("A", drifting, log)},
        Policy(batch=10, min_samples=20, max_samples=60, max_seconds=1e9),
    )
    assert not res["A"].stable
    assert len(res["A"].samples) == 60


def test_time_bound_stops_rounds():
    ticks = iter(range(0, 10_000))
    log = []
    drifting = [float(i) for i in range(1, 10_000)]
    res = interleave(
        {"A": SeqTimer("A", drifting, log), "B": SeqTimer("B", drifting, log)},
        Policy(batch=10, min_samples=20, max_samples=10_000, max_seconds=3),
        clock=lambda: next(ticks),
    )
    # clock advances one per check: rounds stop after a handful, not at max_samples
    assert 10 <= len(res["A"].samples) < 100
    assert len(res["A"].samples) == len(res["B"].samples)


# ----- verification and time_shape ---------------------------------------------------------------


class FakeBackend:
    def __init__(self, errors, us=None, unsupported=(), crash=()):
        self.errors, self.us = errors, us or {}
        self.unsupported, self.crash = set(unsupported), set(crash)
        self.timers = []
        self.verified = []
        self.log = []

    def verify(self, shape, cand):
        self.verified.append(cand.name)
        if cand.name in self.unsupported:
            raise Unsupported("not on this device")
        if cand.name in self.crash:
            raise RuntimeError("kernel launch failed")
        return self.errors[cand.name]

    def timer(self, shape, cand, regime):
        t = SeqTimer((cand.name, regime), [self.us.get((cand.name, regime), 10.0)], self.log)
        self.timers.append(t)
        return t


SHAPE = Shape(64, 256, 5120, "bf16")


def test_verification_failure_is_recorded_and_not_timed():
    cands = [Candidate("good"), Candidate("wrong"), Candidate("nan")]
    be = FakeBackend(
        {"good": 2e-3, "wrong": 0.3, "nan": float("nan")},
        {("good", "warm"): 10.0, ("good", "cold"): 12.0},
    )
    ms = time_shape(SHAPE, cands, be, Policy(batch=5, min_samples=10))
    by = {(m.candidate.name, m.regime): m for m in ms}
    assert len(ms) == 6
    assert by[("good", "warm")].status == "ok" and by[("good", "warm")].us == 10.0
    assert by[("good", "cold")].us == 12.0 and by[("good", "cold")].method == "graph"
    assert by[("good", "cold")].err == 2e-3
    for name in ("wrong", "nan"):
        for regime in ("warm", "cold"):
            m = by[(name, regime)]
            assert m.status == "verify_failed" and m.us is None and m.samples == 0
    assert by[("wrong", "warm")].err == 0.3 and "over tolerance" in by[("wrong", "warm")].note
    # only the verified candidate got timers; every timer was closed
    assert {t.name[0] for t in be.timers} == {"good"}
    assert all(t.closed for t in be.timers)
    # the log holds only "good" batches: the failed ones never ran
    assert {n[0][0] for n in be.log} == {"good"}


def test_unsupported_and_crashing_candidates_do_not_stop_the_others():
    cands = [Candidate("a"), Candidate("b"), Candidate("c")]
    be = FakeBackend({"a": 1e-3, "b": 1e-3, "c": 1e-3}, unsupported={"b"}, crash={"c"})
    ms = time_shape(SHAPE, cands, be, Policy(batch=5, min_samples=10))
    st_ = {(m.candidate.name, m.regime): m.status for m in ms}
    assert st_ == {
        ("a", "warm"): "ok",
        ("a", "cold"): "ok",
        ("b", "warm"): "unsupported",
        ("b", "cold"): "unsupported",
        ("c", "warm"): "error",
        ("c", "cold"): "error",
    }
    assert "kernel launch failed" in next(m.note for m in ms if m.candidate.name == "c")


def test_candidates_and_regimes_interleave_within_a_shape():
    be = FakeBackend({"x": 1e-3, "y": 1e-3})
    time_shape(SHAPE, [Candidate("x"), Candidate("y")], be, Policy(batch=5, min_samples=10))
    order = [n[0] for n in be.log]
    assert order[:4] == [("x", "warm"), ("x", "cold"), ("y", "warm"), ("y", "cold")]
    assert order[4:8] == order[:4]


def test_tolerances_by_dtype():
    assert verified(5e-3, "bf16") and not verified(2e-2, "bf16")
    assert verified(1e-3, "fp16") and not verified(5e-3, "fp16")
    assert verified(9e-3, "fp8")
    assert not verified(float("nan"), "bf16") and not verified(None, "bf16")
    assert TOLERANCE["fp16"] < TOLERANCE["bf16"]


# ----- candidates and shapes checks --------------------------------------------------------------


def test_candidates_per_dtype_and_aiter_incumbent():
    assert [c.name for c in candidates_for(SHAPE)] == ["torch.linear", "torch.mm"]
    assert [c.layout for c in candidates_for(SHAPE)] == ["tn", "nn"]
    fp8 = Shape(16, 1024, 4096, "fp8", config="aiter/configs/a8w8_tuned_gemm.csv", kernel_id=12)
    assert [c.name for c in candidates_for(fp8)] == [
        "torch._scaled_mm:rowwise",
        "torch._scaled_mm:tensorwise",
    ]
    with_aiter = candidates_for(fp8, aiter=True)
    assert [c.name for c in with_aiter][2:] == ["aiter:gemm_a8w8_tune:0", "aiter:gemm_a8w8_tune:12"]
    assert [c.kernel_id for c in with_aiter][2:] == [0, 12]
    # kernelId 0 is already the incumbent: not timed twice
    assert (
        len(
            candidates_for(
                Shape(
                    16, 1024, 4096, "fp8", config="aiter/configs/a8w8_tuned_gemm.csv", kernel_id=0
                ),
                aiter=True,
            )
        )
        == 3
    )


def test_check_shape_and_fp8_support():
    check_shape(SHAPE)
    with pytest.raises(ValueError, match="N must be a positive integer"):
        check_shape(Shape(1, 0, 1))
    with pytest.raises(ValueError, match="unsupported dtype"):
        check_shape(Shape(1, 1, 1, "int8"))
    assert fp8_supported("sm_90") and fp8_supported("sm_89") and not fp8_supported("sm_80")
    assert fp8_supported("gfx942") and fp8_supported("gfx950") and not fp8_supported("gfx90a")


# ----- rows with the roofline --------------------------------------------------------------------


def test_rows_carry_roofline_and_methodology():
    be = FakeBackend(
        {"torch.linear": 1e-3, "bad": 1.0},
        {("torch.linear", "warm"): 40.0, ("torch.linear", "cold"): 50.0},
    )
    shape = Shape(1, 8192, 8192, "bf16", config="aiter/configs/x.csv", config_row=7, tuner_us=30.0)
    ms = time_shape(
        shape, [Candidate("torch.linear"), Candidate("bad")], be, Policy(batch=5, min_samples=10)
    )
    measured = [
        {"what": "copy", "value": 4000.0, "extra": {"burst_value": 3900.0}},
        {"what": "gemm_bf16", "value": 660.0, "extra": {"burst_value": 780.0}},
    ]
    ceil = ceilings_from(measured, PEAKS["H200"])
    assert (
        ceil.copy_gbps == 4000.0
        and ceil.tflops("bf16") == 780.0
        and ceil.tflops("fp8") == PEAKS["H200"].fp8_tflops
    )
    rows = rows_for(
        ms,
        run_id="r",
        device="NVIDIA H200",
        arch="sm_90",
        ceilings=ceil,
        peaks=PEAKS["H200"],
        pass_no=2,
        common={"torch": "x"},
    )
    by = {(r.candidate, r.regime): r for r in rows}
    cold = by[("torch.linear", "cold")]
    assert cold.status == "ok" and cold.us == 50.0 and cold.pass_no == 2 and cold.part == "H200"
    assert cold.bound == "memory"
    assert cold.gbps == pytest.approx(134_250_496 / 50e-6 / 1e9)
    assert cold.pct_of_bound == pytest.approx(100 * (134_250_496 / 4000e9 * 1e6) / 50.0)
    assert cold.extra["pct_of_datasheet_bound"] == pytest.approx(
        100 * (134_250_496 / 4800e9 * 1e6) / 50.0
    )
    assert cold.extra["tuner_us"] == 30.0 and cold.extra["torch"] == "x" and cold.config_row == 7
    bad = by[("bad", "warm")]
    assert (
        bad.status == "verify_failed"
        and bad.us is None
        and bad.tflops is None
        and bad.pct_of_bound is None
    )
    assert bad.bound == "memory"  # the shape's bound is known even when nothing was timed
