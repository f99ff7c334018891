"""aiter kernel lists read statically with libcst: fields, ids, names, duplicates, unsupported
constructs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckkb.extract.aiter_kernels import STAGE, kernel_rows, normalised, op_of, read_kernel_file
from ckkb.kb.schema.aiter import AiterKernelListRow, AiterKernelRow

MINI = Path(__file__).resolve().parents[1] / "fixtures" / "aiter_mini"


def _read(rel: str):
    return read_kernel_file(rel, (MINI / rel).read_bytes())


def test_fields_ids_and_names_of_the_a8w8_list():
    kf = _read("csrc/ck_gemm_a8w8/gemm_a8w8_common.py")
    assert kf.op == "gemm_a8w8"
    assert kf.classes == ["kernelInstance"]
    lists = {kl.name: kl for kl in kf.lists}
    assert set(lists) == {"kernels_list", "default_kernels_dict"}
    kl = lists["kernels_list"]
    assert kl.fields == [
        "BLOCK_SIZE",
        "MPerBLOCK",
        "NPerBLOCK",
        "KPerBLOCK",
        "WAVE_TILE_M",
        "WAVE_TILE_N",
        "LOOP_SCHED",
        "PIPELINE_VERSION",
        "PAD",
    ]
    assert [e.key for e in kl.entries] == [0, 1, 2, 3, 4, 4]
    by_id = kl.by_id()
    assert by_id[0].name == "mini_a8w8_256x128x128x64_32x32_intrawave_v3_nopad"
    assert (
        by_id[2].name == "mini_a8w8_128x32x64x128_16x16_interwave_v1_pad"
    )  # keyword argument PAD=True
    assert by_id[2].values["PAD"] is True and by_id[0].values["PAD"] is False  # default filled in
    assert (
        by_id[4].name == "mini_a8w8_64x16x32x128_16x16_intrawave_v2_nopad"
    )  # the last id 4 wins, as in Python
    assert by_id[0].line == 32


def test_duplicate_id_in_one_literal_and_identical_kernels():
    kl = {k.name: k for k in _read("csrc/ck_gemm_a8w8/gemm_a8w8_common.py").lists}["kernels_list"]
    assert kl.duplicate_ids == [4]
    assert [e.shadowed for e in kl.entries] == [False, False, False, False, True, False]
    assert {e.key: e.duplicate_of for e in kl.entries if e.duplicate_of is not None} == {3: 1}


def test_default_dict_keys_in_parentheses_and_negative():
    kl = {k.name: k for k in _read("csrc/ck_gemm_a8w8/gemm_a8w8_common.py").lists}[
        "default_kernels_dict"
    ]
    assert [e.key for e in kl.entries] == [-1]
    assert kl.entries[0].name == "mini_a8w8_64x16x16x128_16x16_interwave_v2_nopad"


def test_join_over_a_str_iterates_characters_like_python():
    # ("x").join(str(16)) is "1x6" in Python; the static reader must not "fix" it.
    kl = _read("csrc/ck_gemm_a4w4_blockscale/gemm_a4w4_blockscale_common.py").lists[0]
    assert [e.name for e in kl.entries] == [
        "mini_a4w4_256x64x128x128_8",
        "mini_a4w4_256x32x128x48_1x6",
    ]


def test_unsupported_constructs_are_reported_with_lines_not_guessed():
    kf = _read("csrc/ck_unsupported/unsupported_common.py")
    kl = kf.lists[0]
    assert [e.key for e in kl.entries] == [0]  # entry 1 lacks a field with no default: skipped
    assert kl.entries[0].name is None
    msgs = {(d.line, d.severity): d.message for d in kf.diagnostics}
    assert (
        msgs[(12, "warning")]
        == "kernelInstance.name not evaluated statically: unsupported method call .format()"
    )
    assert (
        msgs[(17, "error")]
        == "kernels_list[1]: field TAG has no value and no default; entry skipped"
    )


@pytest.mark.parametrize(
    ("data", "line", "needle"),
    [
        (b"x = {\n0: (\n", 2, "syntax error"),
        (b"# ok\n\xff\xfe\n", 2, "not UTF-8"),
    ],
)
def test_bad_files_become_diagnostics(data, line, needle):
    kf = read_kernel_file("csrc/ck_x/x_common.py", data)
    assert kf.lists == []
    assert len(kf.diagnostics) == 1
    assert kf.diagnostics[0].line == line and needle in kf.diagnostics[0].message


def test_stage_lists_files_relative_and_rows_carry_normalised_columns():
    files = sorted(p.as_posix() for p in STAGE.files(MINI))
    assert files == [
        "csrc/ck_gemm_a4w4_blockscale/gemm_a4w4_blockscale_common.py",
        "csrc/ck_gemm_a8w8/gemm_a8w8_common.py",
        "csrc/ck_unsupported/unsupported_common.py",
    ]
    res = STAGE.extract(MINI, files[1], (MINI / files[1]).read_bytes())
    rows = kernel_rows([res.facts["kfile"]])
    lists = [r for r in rows if isinstance(r, AiterKernelListRow)]
    ks = [r for r in rows if isinstance(r, AiterKernelRow)]
    assert [(r.name, r.entries, r.duplicate_ids) for r in lists] == [
        ("kernels_list", 6, [4]),
        ("default_kernels_dict", 1, []),
    ]
    k2 = next(k for k in ks if k.kernel_id == 2 and k.list_name == "kernels_list")
    assert (
        k2.block_size,
        k2.tile_m,
        k2.tile_n,
        k2.tile_k,
        k2.mfma_m,
        k2.mfma_n,
        k2.pipeline,
        k2.scheduler,
    ) == (128, 32, 64, 128, 16, 16, "v1", "Interwave")
    assert (
        STAGE.extract(MINI, "x_common.py", b"kernels = {}\n").facts == {}
    )  # no dataclass: skipped cheaply


def test_op_of_and_normalised():
    assert (
        op_of("csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_common.py")
        == "gemm_a8w8_blockscale"
    )
    n = normalised(
        {
            "BLOCK_SIZE": 256,
            "MPerBLOCK": 128,
            "NPerBLOCK": 64,
            "KPerBLOCK": 64,
            "MPerXDL": 32,
            "NPerXDL": 32,
            "WAVE_MAP_M": 2,
            "WAVE_MAP_N": 1,
            "PIPELINE_VERSION": 3,
            "PIPELINE_Sched": "Intrawave",
        }
    )
    assert (n["tile_m"], n["mfma_m"], n["xdl_m"], n["waves_m"], n["waves_n"], n["pipeline"]) == (
        128,
        32,
        2,
        2,
        2,
        "v3",
    )


# ------------------------------------------------------- property: static name == Python's name

_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", min_size=1, max_size=8)
_ints = st.integers(min_value=-5, max_value=4096)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=_ints,
    b=st.lists(_ints, min_size=1, max_size=4),
    sched=_words,
    flag=st.booleans(),
    c=st.integers(0, 999),
    sep=st.sampled_from(["_", "x", "-", ""]),
)
def test_static_name_matches_python(a, b, sched, flag, c, sep):
    src = textwrap.dedent(f"""
        from dataclasses import dataclass

        @dataclass
        class kernelInstance:
            A: int
            B: list[int]
            SCHED: str
            FLAG: bool = False
            C: int = 7

            @property
            def name(self) -> str:
                return ({sep!r}).join(
                    element
                    for element in [
                        f"k{{self.A}}",
                        ("x").join(map(lambda x: str(x), self.B)),
                        ("x").join(str(self.C)),
                        self.SCHED.lower() + "_" + self.SCHED.upper(),
                        "flag" if self.FLAG else "",
                        "v" + str(int(self.FLAG)),
                        "_".join([str(v * 2) for v in self.B if v > 0]),
                    ]
                    if element != ""
                )

        kernels_list = {{
            0: kernelInstance({a}, {b!r}, {sched!r}, FLAG={flag}, C={c}),
        }}
    """)
    kf = read_kernel_file("csrc/ck_p/p_common.py", src.encode())
    assert kf.diagnostics == []
    ns: dict = {}
    exec(compile(src, "<generated>", "exec"), ns)  # our own generated snippet, as the oracle
    assert kf.lists[0].entries[0].name == ns["kernels_list"][0].name


def _aiter_python_files() -> list[tuple[str, bytes]]:
    """The fixture tree's and (where installed) the aiter wheel's kernel-list and tuner files."""
    from ckkb.extract import aiter_tuners

    out = [(p.relative_to(MINI).as_posix(), p.read_bytes()) for p in sorted(MINI.rglob("*.py"))]
    try:
        from ckkb import sources

        root = Path(sources.aiter_tree().root)
    except Exception:  # no wheel: the fixture tree only
        return out
    for rel in STAGE.files(root) + aiter_tuners.STAGE.files(root):
        out.append((str(rel), (root / rel).read_bytes()))
    return out


EDGE_CASES = [
    (
        "@dataclass\nclass K:\n    a: int\n    b: int = 2\n\n\n"
        "x = {  # c\n    0: K(1,  # one\n         3),\n    (1): K(\n        2\n    ),\n"
        "    **extra,\n    2: [K(1)],\n}\n"
    ),
    "@dataclass\nclass K:\n    a: int\n\n\nx = {0: K(1)} | {}\n",
    "@dataclass\nclass K:\n    a: int\n\n\nx = {0: K('''a\n{b}'''), 'k' \\\n  'j': K(\"}\")}\n",
    (
        "@dataclass\nclass K:\n    a: int\n\n\n"
        "x = y = {0: K(1)}\nz = {0: K(2)}; w = 1\nif True: q = {0: K(3)}\n"
    ),
    "@dataclass\nclass K:\n    a: int\n\n\nx = {0: K(1), 1: K(",
    (
        "@dataclass\nclass K:\n    a: int\n    b: int = 0\n\n\n"
        "x = {0: K(a=(1), b = 2,), 1: K(*y), 2: K(), 3: K(1, b=[2, (3)]  # c\n), "
        "4: K(x == 1), 5: K(f(1, 2)), 6: K(1)(2)}\n"
    ),
]


# What Python itself makes of each EDGE_CASES source (read by hand): the kernel dicts' entries as
# (key, line, values), and the lines of the entries that cannot be read statically.
EDGE_EXPECTED = [
    (
        [("x", [(0, 8, {"a": 1, "b": 3}), (1, 10, {"a": 2, "b": 2})])],
        [13, 14],  # `**extra`, `2: [K(1)]`
    ),
    ([], []),  # `{...} | {}` is not a dict literal
    ([("x", [(0, 6, {"a": "a\n{b}"}), ("kj", 7, {"a": "}"})])], []),
    ([("z", [(0, 7, {"a": 2})])], []),  # `x = y = ...` and the `if` body are not read
    ([], [6]),  # unclosed call: a syntax error, file skipped
    ([("x", [(0, 7, {"a": 1, "b": 2}), (3, 7, {"a": 1, "b": [2, 3]})])], [7, 7, 8, 8, 8]),
]


@pytest.mark.parametrize("src, expected", list(zip(EDGE_CASES, EDGE_EXPECTED, strict=True)))
def test_reader_on_edge_cases(src, expected):
    lists, diag_lines = expected
    kf = read_kernel_file("csrc/ck_e/e_common.py", src.encode())
    assert [(kl.name, [(e.key, e.line, e.values) for e in kl.entries]) for kl in kf.lists] == lists
    assert [d.line for d in kf.diagnostics] == diag_lines


FIELDS = {"A": 16, "B": 2, "S": "Intrawave", "F": True}


@pytest.mark.parametrize(
    "expr",
    [
        '("_").join(["a", ("x").join(map(lambda x: str(x), [self.A, self.B])), '
        'self.S.lower(), f"v{self.A}"])',
        '"p" + str(int(self.F)) if self.A > 1 else "q"',
        '("x").join(str(self.A))',
        'f"{self.A!r}{self.S!s}"',
        "[x for x in [self.A, 2] if x > 1]",
        "self.A * 2 + self.B - 1",
    ],
)
def test_evaluator_agrees_with_python(expr):
    """Expressions the evaluator reads give what Python itself gives (the second method: eval with a
    `self` carrying the fields)."""
    import types

    import libcst as cst

    from ckkb.extract.aiter_pyeval import Evaluator, compile_expr

    node = cst.parse_expression(expr)
    want = eval(expr, {}, {"self": types.SimpleNamespace(**FIELDS)})  # noqa: S307 - test literal
    assert Evaluator({}, FIELDS, "K").eval(node) == want
    assert compile_expr(node, "K")({}, FIELDS) == want


@pytest.mark.parametrize(
    ("expr", "what"),
    [
        ('"{}".format(self.A)', "unsupported method call .format()"),
        ("self.MISSING", "self.MISSING is not a field of K"),
        ('f"{self.A:>4}"', "unsupported f-string format spec"),
        ("map(lambda x, y: x, [1])", "lambda called with the wrong number of arguments"),
        ("other.A", "unsupported attribute access"),
        ('self.A - "s"', "cannot evaluate Subtract: unsupported operand"),
        ("open(self.S)", "call of open() is not evaluated statically"),
    ],
)
def test_evaluator_refuses_with_the_node(expr, what):
    """What the evaluator cannot read raises Unsupported with a message and the node, for the
    caller's file and line; without fields, `self.X` is refused too."""
    import libcst as cst

    from ckkb.extract.aiter_pyeval import Evaluator, Unsupported

    node = cst.parse_expression(expr)
    with pytest.raises(Unsupported) as e:
        Evaluator({}, FIELDS, "K").eval(node)
    assert e.value.what.startswith(what) and e.value.node is not None
    if expr.startswith("self."):
        with pytest.raises(Unsupported, match="unsupported attribute access"):
            Evaluator({}, None, "K").eval(node)


def test_start_lines_and_parse_lines_give_file_lines():
    """Lines counted by hand in the text below (the second method): a statement parsed alone by
    parse_lines gets the lines it has in the whole file, nested nodes included."""
    import libcst as cst

    from ckkb.extract import pyscan

    text = "x = 1\n\ndef f(a,\n      b):\n    return [a,\n            b]\n"
    module = cst.parse_module(text)
    lines = pyscan.start_lines(module)
    assert sorted(set(lines.values())) == [1, 2, 3, 4, 5, 6]  # the blank line 2 is a node too
    ret = module.body[1].body.body[0].body[0]
    assert lines[id(ret)] == 5 and lines[id(ret.value.elements[1])] == 6
    scan = pyscan.SourceScan(text)
    first, _header, stop = scan.compounds()[1]
    _mod, stmt, positions = pyscan.parse_lines(scan, first, stop)
    ret = stmt.body.body[0].body[0]
    assert positions.get(id(stmt)) == 3 and positions.get(id(ret.value.elements[1])) == 6
