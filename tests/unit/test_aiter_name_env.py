"""Kernel names that read module-level names (aiter 2026-08's MoE lists: `ACT_OP_NAME[self.ActOP]`
with `ACT_OP_NAME = {v: k for k, v in ACT_OP_MAP.items()}`): computed as Python computes them,
whatever spelling a field's value has (0/1/True/False), and never guessed where the module binds
a name in a way ckkb does not run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckkb.extract import aiter_kernels
from ckkb.extract.aiter_kernels import read_kernel_file

MOE = Path(__file__).resolve().parents[1] / "fixtures" / "aiter_2026_moe"

_ACT = st.sampled_from(["0", "1", "3", "True", "False"])


def _both(src: str) -> list:
    """(list, key, name) per entry, from the statement reader and the whole-module reader (the
    two must agree)."""
    out = []
    for read in (read_kernel_file, aiter_kernels._read_module):
        kf = read("csrc/ck_m/m_common.py", src.encode())
        out.append(([(kl.name, e.key, e.name) for kl in kf.lists for e in kl.entries], kf))
    assert out[0][0] == out[1][0]
    return out[0]


def _python(src: str, lists: list[str]) -> list:
    ns: dict = {}
    exec(compile(src, "<generated>", "exec"), ns)  # our own generated snippet, as the oracle
    return [(n, k, v.name) for n in lists for k, v in ns[n].items()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    default=_ACT,
    acts=st.lists(_ACT, min_size=1, max_size=4),
    annotation=st.sampled_from(["int", "bool"]),
    after=st.booleans(),
)
def test_module_names_read_as_python_reads_them(default, acts, annotation, after):
    table = textwrap.dedent("""
        ACT_OP_MAP = {"gelu": 0, "silu": 1, "swiglu": 3}
        ACT_OP_NAME = {v: k for k, v in ACT_OP_MAP.items()}
        SUFFIX = dict(ACT_OP_NAME)
        SUFFIX.update({0: "g"})
        SUFFIX[3] += "!"
    """)
    body = textwrap.dedent(f"""
        from dataclasses import dataclass

        @dataclass
        class K:
            B: int
            ActOP: {annotation} = {default}

            @property
            def name(self) -> str:
                return "_".join([str(self.B), ACT_OP_NAME[self.ActOP], SUFFIX[self.ActOP]])
    """)
    entries = ", ".join(f"{i}: K({i}, {a})" for i, a in enumerate(acts))
    lst = f"kernels_list = {{{entries}, 9: K(9)}}\n"
    # a property runs after the import: names bound below the list are seen too
    src = body + lst + table if after else table + body + lst
    got, kf = _both(src)
    assert got == _python(src, ["kernels_list"])
    assert kf.diagnostics == []


@pytest.mark.parametrize(
    ("binding", "unknown"),
    [
        ("from elsewhere import TAGS", "TAGS"),
        ("import TAGS", "TAGS"),
        ("if cond():\n    TAGS = {0: 'a'}", "TAGS"),
        ("TAGS = {0: 'a'}\nfor k in range(2):\n    TAGS[k] = 'b'", "TAGS"),
        ("TAGS = {0: 'a'}\ndef reset():\n    global TAGS\n    TAGS = {}", "TAGS"),
        ("TAGS = {0: 'a'}\nTAGS.update(load())", "TAGS"),
        ("TAGS = make()", "TAGS"),
        ("BASE = open('x')\nTAGS = {0: BASE}", "TAGS"),
        ("def TAGS():\n    return {0: 'a'}", "TAGS"),
    ],
)
def test_names_bound_otherwise_are_not_guessed(binding, unknown):
    src = (
        textwrap.dedent("""
        from dataclasses import dataclass

        @dataclass
        class K:
            A: int

            @property
            def name(self) -> str:
                return "k_" + TAGS[self.A]

        kernels_list = {0: K(0)}
    """)
        + binding
        + "\n"
    )
    got, kf = _both(src)
    assert got == [("kernels_list", 0, None)]
    msgs = [d.message for d in kf.diagnostics]
    assert len(msgs) == 1 and "K.name not evaluated statically" in msgs[0], msgs
    assert f"{unknown!r} is not known statically" in msgs[0] or "call of" in msgs[0], msgs


def test_a_module_name_that_shadows_a_builtin_is_the_modules():
    src = textwrap.dedent("""
        from dataclasses import dataclass

        str = lambda x: "s" + x  # noqa: E731

        @dataclass
        class K:
            A: str

            @property
            def name(self) -> str:
                return "k_" + str(self.A)

        kernels_list = {0: K("a")}
    """)
    got, kf = _both(src)
    assert got == [("kernels_list", 0, "k_sa")] == _python(src, ["kernels_list"])


def test_the_2026_moe_fixture_names_its_gemm1_kernels():
    rel = "csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py"
    kf = read_kernel_file(rel, (MOE / rel).read_bytes())
    names = {(kl.name, e.key): e.name for kl in kf.lists for e in kl.entries}
    # composed by hand from the fixture: ActOP defaults to 0, ACT_OP_NAME[0] is "gelu", Adtype ""
    assert names[("a8w8_gemm1_kernels_list", 0)] == (
        "moe_ck2stages_gemm1_256x16_TypeCast_Quant1_MulRoutedWeight0_gelu_"
    )
    assert names[("a8w8_gemm1_kernels_list_gfx950", 1)] == (
        "moe_ck2stages_gemm1_256x64_TypeCast_Quant1_MulRoutedWeight0_gelu_"
    )
    # kernelInstanceGEMM2.name reads self.Adtype, which GEMM2 lacks: Python raises, so no name
    assert names[("a8w8_gemm2_kernels_list", 0)] is None
