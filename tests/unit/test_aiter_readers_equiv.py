"""The statement-by-statement aiter readers (fast paths) give what the whole-module libcst readers
(their references) give: on generated sources in many shapes (hypothesis), and on every
kernel-list, tuner and core.py file of the installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckkb.extract import aiter_kernels, aiter_tuner_reader, aiter_tuners

# Pieces a kernel list or a tuner is written with: literals, expressions that do not evaluate
# statically, and the spacing, comments and line breaks between tokens.
_VALUES = st.sampled_from(
    ["1", "-2", "(3)", "'s'", '"t"', "True", "None", "[1, 2]", "(1,)", "{'a': 1}", "x", "f(1)",
     "1 + 2", "'a' 'b'", "[v for v in y]", "lambda: 1", "'''m\n{l}'''", "*y", "K(1)"]
)  # fmt: skip
_PLAIN = _VALUES.filter(lambda v: not v.startswith("*"))  # where Python takes no `*y`
_GAPS = st.sampled_from(["", " ", "  ", "\n    ", "  # c\n    ", " \\\n    "])
_KEYS = st.sampled_from(["0", "1", "-1", "(2)", "'k'", "'a' 'b'", "k", "(0, 1)", "**extra"])


@st.composite
def _kernel_source(draw: st.DrawFn) -> str:
    fields = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True))
    n_defaults = draw(st.integers(0, len(fields)))
    lines = ["from dataclasses import dataclass", "", "", "@dataclass", "class K:"]
    for i, f in enumerate(fields):
        default = f" = {draw(_VALUES)}" if i >= len(fields) - n_defaults else ""
        lines.append(f"    {f}: int{default}")
    if draw(st.booleans()):
        lines += ["", "    @property", "    def name(self) -> str:",
                  f"        return {draw(st.sampled_from(_NAMES))}"]  # fmt: skip
    lines += ["", ""]
    for d in range(draw(st.integers(1, 2))):
        entries = []
        for _ in range(draw(st.integers(0, 4))):
            key = draw(_KEYS)
            if key == "**extra":
                entries.append(key)
                continue
            n_pos = draw(st.integers(0, len(fields) + 1))
            args = [draw(_VALUES) for _ in range(n_pos)]  # positional first, as Python wants
            for f in draw(st.lists(st.sampled_from(fields), max_size=len(fields), unique=True)):
                value = draw(_PLAIN)
                args.append(f"{f}{draw(_GAPS)}={draw(st.sampled_from(['', ' ']))}{value}")
            sep = "," + draw(_GAPS)
            trail = draw(st.sampled_from(["", ","]))
            call = draw(st.sampled_from(["K({})"] * 5 + ["[K({})]", "K({})(1)", "K ({})"]))
            entries.append(f"{key}:{draw(_GAPS)}{call.format(sep.join(args) + trail)}")
        comma = draw(st.sampled_from(["", ","])) if entries else ""
        body = ("," + draw(_GAPS)).join(entries) + comma
        tail = draw(st.sampled_from(["", "", "", "", "", " | {}", "; w = 1"]))
        lines.append(f"kernels_{d} = {{{draw(_GAPS)}{body}{draw(_GAPS)}}}{tail}")
    if draw(st.booleans()):
        lines.append("if x:\n    y = {0: K(1)}")
    return "\n".join(lines) + "\n"


_NAMES = [
    '"_".join([str(self.a), "k"])',
    'f"k_{self.a}"',
    "str(self.a) + self.b",
    "self.a.lower()",
    '"x".join(map(lambda v: str(v), [self.a]))',
]


@st.composite
def _tuner_source(draw: st.DrawFn) -> str:
    lines = [draw(st.sampled_from([
        "from aiter.jit.core import AITER_CONFIG_GEMM_A8W8, AITER_CONFIG_X",
        "from gemm_a8w8_common import kernels_list",
        "import argparse",
        "from aiter.jit.core import (\n    AITER_CONFIG_Y,  # c\n)",
    ])) for _ in range(draw(st.integers(0, 3)))]  # fmt: skip
    lines += ["", "", "class Tuner(Base):"]
    for _ in range(draw(st.integers(0, 2))):
        items = ", ".join(f"'{k}': {draw(_PLAIN)}" for k in draw(
            st.lists(st.sampled_from(["warmup", "iters", "mp"]), max_size=3, unique=True)
        ))  # fmt: skip
        spread = draw(st.sampled_from(["", "**Base.ARG_DEFAULTS, "]))
        lines.append(f"    ARG_DEFAULTS = {{{spread}{items}}}")
    lines += ["    def run(self, parser):", "        pass"]
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(["'--a'", "'-b', '--bb'", "'--c-d'", "name"]))
        kws = [
            f"{k}={draw(_VALUES)}"
            for k in draw(
                st.lists(
                    st.sampled_from(["default", "type", "action", "help"]), max_size=3, unique=True
                )
            )  # fmt: skip
        ]
        args = ("," + draw(_GAPS)).join([flag, *kws])
        prefix = draw(st.sampled_from(["parser.", "self.parser.", "x = parser."]))
        lines.append(f"        {prefix}add_argument({args})")
    if draw(st.integers(0, 4)) == 0:
        lines.append("        if x: parser.add_argument('--z')")
    return "\n".join(lines) + "\n"


_SLOW = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SLOW
@given(_kernel_source())
def test_kernel_statement_reader_matches_the_module_reader(src: str) -> None:
    data = src.encode()
    rel = "csrc/ck_g/g_common.py"
    # repr: a value such as a lambda default holds libcst nodes, which compare by identity
    fast = aiter_kernels.read_kernel_file(rel, data)
    assert repr(fast) == repr(aiter_kernels._read_module(rel, data))


@_SLOW
@given(_tuner_source())
def test_tuner_statement_reader_matches_the_module_reader(src: str) -> None:
    data = src.encode()
    rel = "aiter/csrc/ck_g/g_tune.py"
    fast = aiter_tuner_reader.read_tuner(rel, data)
    assert repr(fast) == repr(aiter_tuner_reader.read_tuner_module(rel, data))


def test_statement_readers_match_the_module_readers_on_the_wheel() -> None:
    from ckkb import sources

    try:
        root = Path(sources.aiter_tree().root)
    except Exception:  # no wheel installed
        pytest.skip("amd-aiter wheel not installed")
    n = 0
    for rel in aiter_kernels.STAGE.files(root):
        data = (root / rel).read_bytes()
        assert aiter_kernels.read_kernel_file(str(rel), data) == aiter_kernels._read_module(
            str(rel), data
        ), rel
        n += 1
    for rel in aiter_tuners.STAGE.files(root):
        r, data = str(rel), (root / rel).read_bytes()
        if r.endswith("jit/core.py"):
            fast, ref = aiter_tuner_reader.read_core(r, data), aiter_tuner_reader.read_core_module
        else:
            fast, ref = aiter_tuner_reader.read_tuner(r, data), aiter_tuner_reader.read_tuner_module
        assert fast == ref(r, data), r
        n += 1
    assert n >= 20  # 10 kernel-list files and 12 tuner/core files in 0.1.7.post2.dev18 (ls)
