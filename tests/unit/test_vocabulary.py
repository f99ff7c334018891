"""The one dtype vocabulary: every spelling reads as one data type, and no spelling two."""

from __future__ import annotations

from ckkb import vocabulary as v


def test_every_spelling_names_exactly_one_dtype():
    seen: dict[str, str] = {}
    for d in v.DTYPES:
        for s in d.spellings:
            assert s not in seen, f"{s} names {seen[s]} and {d.name}"
            seen[s] = d.name


def test_the_spellings_ck_profiler_and_users_write_agree():
    # instance rows carry bhalf_t (or the file's alias
    # BF16), ckProfiler prints bf16, users type BF16
    assert {v.cpp_type(w) for w in ("bf16", "BF16", "bhalf_t", "ck::bhalf_t")} == {"bhalf_t"}
    assert v.cpp_type("fp16") == v.cpp_type("FP16") == v.cpp_type("f16") == "half_t"
    assert v.dtype("f8_fnuz_t") == v.dtype("fp8") == v.dtype("F8")
    assert v.cpp_type("no_such_t") == "no_such_t" and v.dtype("") is None
    assert "F16" in v.spellings("fp16") and v.spellings("x") == frozenset({"x"})
