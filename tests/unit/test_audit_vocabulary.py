"""The KB audit rules read dtypes through ckkb.vocabulary (issue 12 item 5: one vocabulary):
every spelling of an instance's A type or a measurement's dtype is compared by its canonical
word. Failed before: rules_kb kept its own spellings (`f8_t`, `fp8`, ...), so `ck::f8_ocp_t`
instances and `FP8`/`f8` measurements never matched an a8w8 op."""

from __future__ import annotations

import pytest

from ckkb import vocabulary
from ckkb.audit.rules_kb import BaselineIndex, CkIndex, dtype_hints


def test_op_families_name_canonical_dtypes():
    assert dtype_hints("gemm_a8w8_blockscale") == ("f8", "i8")
    assert dtype_hints("bf16_batched_gemm") == ("bf16",)
    assert dtype_hints("gemm_a4w4") == ("f4",)
    assert dtype_hints("fmoe") is None
    for names in (
        *vocabulary.AITER_KERNEL_DTYPES.values(),
        *vocabulary.AITER_MEASURED_DTYPES.values(),
    ):
        assert all(vocabulary.dtype(n) is not None and vocabulary.dtype(n).name == n for n in names)


@pytest.mark.parametrize(
    "a_dtype, matches",
    [
        ("f8_t", True),
        ("ck::f8_t", True),
        ("ck::f8_ocp_t", True),
        ("F8", True),
        ("int8_t", True),
        ("bf8_t", False),
        ("half_t", False),
    ],
)
def test_instance_a_dtypes_compared_by_their_canonical_word(a_dtype, matches):
    cand = {"template": "DeviceGemm_Xdl_CShuffleV3", "a_dtype": a_dtype, "pipeline": None}
    got = CkIndex._matches([{**cand, "scheduler": None}], ("f8", "i8"), None, None)
    assert bool(got) is matches


@pytest.mark.parametrize("measured", ["fp8", "FP8", "f8", "f8_t"])
def test_measurements_in_any_spelling_are_baselines(measured):
    idx = BaselineIndex()
    idx.add(("gfx942", 16, 1024, 512, measured), 5.0, {"candidate": "x", "regime": "warm"})
    found = idx.lookup("gfx942", 16, 1024, 512, "gemm_a8w8")
    assert found is not None and found["us"] == 5.0
    assert idx.lookup("gfx942", 16, 1024, 512, "gemm_a4w4") is None  # fp4 measures a4w4 only
