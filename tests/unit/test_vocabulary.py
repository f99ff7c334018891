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


def test_race_labels_are_the_legend_words():
    from ckkb.log_events import normalise_dtype

    # what normalise_dtype answered before it read the vocabulary (its own alias table, kept here
    # as the reference): every one unchanged
    old = {"f16": "fp16", "half": "fp16", "f32": "fp32", "float": "fp32", "f8": "fp8"}
    old |= {"bf8": "bf8", "i8": "int8", "f64": "fp64", "bf16": "bf16", "fp16": "fp16"}
    old |= {"int8": "int8", "fp8": "fp8", "fp32": "fp32", "Input": "input", "x_y": "x_y"}
    for word, want in old.items():
        assert normalise_dtype(word) == want == normalise_dtype(f" {word.upper()} "), word
    assert normalise_dtype(None) is None
    # spellings the old table did not know now read as their data type
    assert [normalise_dtype(w) for w in ("half_t", "bhalf_t", "double", "i32", "f4")] == [
        "fp16",
        "bf16",
        "fp64",
        "int32",
        "fp4",
    ]
    assert {d.label for d in v.DTYPES} >= {"fp16", "bf16", "fp32", "int8", "fp8", "bf8", "fp64"}
