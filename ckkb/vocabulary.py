"""One vocabulary for data types and layouts: every spelling CK sources, printed names, ckProfiler
logs, aiter and users write, mapped to one canonical word.

Instance rows carry C++ element types after alias resolution (`bhalf_t`), ckProfiler prints
`bf16` or `BF16`, users type `bf16` or `fp16`, aiter writes `fp8`: each of those reads here, so a
race-to-instance link, `ckkb locate` and `--dtype` filters can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dtype:
    name: str  # canonical short word, as in CK file names
    cpp: str  # the C++ element type instance rows carry
    spellings: frozenset[str]  # every way of writing it (the name and cpp included)
    label: str  # the word ckProfiler's legends use (`fp16`), as race rows store it


def _dtype(name: str, cpp: str, *others: str, label: str = "") -> Dtype:
    return Dtype(name, cpp, frozenset({name, cpp, *others}), label or name)


DTYPES: tuple[Dtype, ...] = (
    _dtype("bf16", "bhalf_t", "ck::bhalf_t", "BF16", "bfloat16"),
    _dtype("f16", "half_t", "ck::half_t", "F16", "fp16", "half", "float16", label="fp16"),
    _dtype("f32", "float", "F32", "fp32", "float32", label="fp32"),
    _dtype("f64", "double", "F64", "fp64", "float64", label="fp64"),
    _dtype("i8", "int8_t", "I8", "int8", label="int8"),
    _dtype("i32", "int32_t", "I32", "int32", label="int32"),
    _dtype(
        "f8",
        "f8_t",
        "ck::f8_t",
        "F8",
        "fp8",
        "f8_fnuz_t",
        "ck::f8_fnuz_t",
        "f8_ocp_t",
        "ck::f8_ocp_t",
        "float8_e4m3fnuz",
        "float8_e4m3fn",
        label="fp8",
    ),
    _dtype(
        "bf8",
        "bf8_t",
        "ck::bf8_t",
        "BF8",
        "bf8_fnuz_t",
        "ck::bf8_fnuz_t",
        "bf8_ocp_t",
        "ck::bf8_ocp_t",
        "float8_e5m2fnuz",
        "float8_e5m2",
    ),
    _dtype("f4", "f4x2_pk_t", "f4_t", "F4", "fp4", label="fp4"),
    _dtype("f6", "f6x16_pk_t", "F6", "fp6", label="fp6"),
    _dtype("bf6", "bf6x16_pk_t", "BF6"),
)
_BY_SPELLING: dict[str, Dtype] = {s: d for d in DTYPES for s in d.spellings}

# GEMM layouts as CK file names and ckProfiler write them: A is MxK or KxM, B is KxN or NxK
LAYOUTS: tuple[str, ...] = ("mk_kn", "mk_nk", "km_kn", "km_nk")


def dtype(word: str | None) -> Dtype | None:
    """The data type any spelling names (`bf16`, `BF16`, `bhalf_t`, `ck::bhalf_t`,
    `torch.bfloat16`; `FP16` too, case aside), else None."""
    if not word:
        return None
    w = word.strip().removeprefix("torch.")  # aiter's configs write torch's dtype names
    return _BY_SPELLING.get(w) or _BY_SPELLING.get(w.lower())


def canonical(word: str | None) -> str | None:
    """The canonical word (`bf16`, `f8`, ...) for any spelling, else None."""
    d = dtype(word)
    return d.name if d else None


# aiter op families (a part of aiter's op and config names) -> canonical data types: the A operand
# their CK kernels consume (a8w8 is 8-bit A: fp8 or int8), and the harness/ckProfiler
# measurements comparable to their rows.
AITER_KERNEL_DTYPES: dict[str, tuple[str, ...]] = {
    "a8w8": ("f8", "i8"),
    "bf16": ("bf16",),
    "a4w4": ("f4",),
}
AITER_MEASURED_DTYPES: dict[str, tuple[str, ...]] = {
    "a8w8": ("f8",),
    "bf16": ("bf16", "f16"),
    "a4w4": ("f4",),
}


def aiter_family(op: str | None, table: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The canonical dtypes `table` gives the first family named in op (None: no family)."""
    for family, names in table.items():
        if op and family in op:
            return names
    return None


def cpp_type(word: str) -> str:
    """The C++ element type instance rows carry for `word`; an unknown word is returned as given."""
    d = dtype(word)
    return d.cpp if d else word


def label(word: str | None) -> str | None:
    """The word race rows store for a data type ckProfiler printed (`f16`, `F16`, `half_t` ->
    `fp16`, as its legends say); a word naming no data type is kept, lower case."""
    if word is None:
        return None
    d = dtype(word)
    return d.label if d else word.strip().lower()


def spellings(word: str) -> frozenset[str]:
    """Every spelling of the data type `word` names (just `word` when it names none)."""
    d = dtype(word)
    return d.spellings if d else frozenset({word})
