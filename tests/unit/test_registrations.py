"""ck.registrations: add functions, registrations, guard chains, gates and per-arch availability."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb import pipeline
from ckkb.archs import ARCHS
from ckkb.extract import availability as av
from ckkb.extract import registrations as rg
from ckkb.extract.conditions import device_effect, directive_stacks
from ckkb.kb.build import build
from ckkb.kb.db import open_db
from ckkb.sources import ck_tree

GPU = "library/src/tensor_operation_instance/gpu"
UNI = f"{GPU}/gemm_universal/device_gemm_xdl_universal_bf16_bf16_bf16"
P = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn"


def calls(src: str, rel: str = f"{GPU}/d/x.cpp"):
    res = rg.extract_file(rel, src.encode())
    return [c for f in res.facts.get("functions", []) for c in f["calls"]], res


def fn(body: str, pre: str = "", post: str = "") -> str:
    return f"""{pre}
void add_device_x_instances(\
std::vector<std::unique_ptr<DeviceGemmV2<Row, Col, Row, BF16>>>& instances)
{{
{body}
}}
{post}"""


# ---------------------------------------------------------------- guard chains


def test_nested_if_else_chain_and_kinds():
    cs, _ = calls(
        fn("""
    add_device_operation_instances(instances, plain_instances<GemmDefault>{});
    if(ck::get_device_name() == "gfx950") { add_device_operation_instances(\
instances, a_instances{}); }
    else if(!ck::is_xdl_supported() || x > 1) {
        add_device_operation_instances(instances, b_instances<2, NHWGC>{});
    }
    else { add_device_operation_instances(instances, c_instances{}); }
""")
    )
    got = {c["list"]: [(g["kind"], g["branch"], g["text"]) for g in c["guards"]] for c in cs}
    assert got["plain_instances"] == []
    assert got["a_instances"] == [("device_name", "then", 'ck::get_device_name() == "gfx950"')]
    assert got["b_instances"] == [
        ("device_name", "else", 'ck::get_device_name() == "gfx950"'),
        ("capability", "then", "!ck::is_xdl_supported() || x > 1"),
    ]
    assert [g["branch"] for g in cs[-1]["guards"]] == ["else", "else"]
    assert cs[0]["args"] == ["GemmDefault"] and cs[2]["args"] == ["2", "NHWGC"]


@pytest.mark.parametrize(
    "cond, effect",
    [
        ('ck::get_device_name() != "gfx950"', "exclude"),
        ('ck::get_device_name() == "gfx950"', "only"),
        ('"gfx950" == ck::get_device_name()', "only"),
        ('!(ck::get_device_name() == "gfx950")', "exclude"),
        ('ck::is_xdl_supported() && ck::get_device_name() != "gfx950"', "exclude"),
        ('!(ck::get_device_name() != "gfx950") || false', "only"),
    ],
)
def test_device_name_effect(cond, effect):
    cs, _ = calls(
        fn(f"if({cond}) {{ add_device_operation_instances(instances, l_instances{{}}); }}")
    )
    g = cs[0]["guards"][0]
    assert (g["kind"], g["op"], g["arch"]) == ("device_name", effect, "gfx950")
    assert device_effect(g["expr"]) == (effect, "gfx950")


def test_preprocessor_guards_if0_ifdef_elif_else():
    cs, _ = calls(
        fn(
            """
#if 0 // off
    add_device_operation_instances(instances, off_instances{});
#elif defined(FOO) || BAR > 1
    add_device_operation_instances(instances, elif_instances{});
#else
    add_device_operation_instances(instances, else_instances{});
#endif
""",
            pre="#ifdef CK_ENABLE_FP8",
            post="#endif",
        )
    )
    got = {c["list"]: [(g["text"], g["branch"]) for g in c["guards"]] for c in cs}
    outer = ("#ifdef CK_ENABLE_FP8", "then")
    assert got["off_instances"] == [outer, ("#if 0", "then")]
    assert got["elif_instances"] == [
        outer,
        ("#if 0", "else"),
        ("#elif defined(FOO) || BAR > 1", "then"),
    ]
    assert got["else_instances"] == [
        outer,
        ("#if 0", "else"),
        ("#elif defined(FOO) || BAR > 1", "else"),
    ]
    e = next(c for c in cs if c["list"] == "elif_instances")["guards"][2]["expr"]
    assert e == {
        "op": "or",
        "args": [
            {"op": "defined", "name": "FOO"},
            {
                "op": "cmp",
                "cmp": ">",
                "args": [{"op": "macro", "name": "BAR"}, {"op": "int", "value": 1}],
            },
        ],
    }


def test_if_inside_tuple_does_not_swallow_the_function():
    # a `#if` that starts with a comma inside a tuple confuses tree-sitter; the directive scan and
    # the re-read of the function keep the registration and its real guards
    src = """
using l_instances = std::tuple<
    Op<1, 2>
#if CK_EXPERIMENTAL_INTER_WAVE_INSTANCES
    ,
    Op<3, 4>,
#endif
    >;

void add_device_y_instances(\
std::vector<std::unique_ptr<DeviceGemm<Row, Row, Row, F16, F16, F16>>>& instances)
{
    add_device_operation_instances(instances, l_instances{});
    if(ck::get_device_name() == "gfx950")
    {
        add_device_operation_instances(instances, l_instances_2x{});
    }
}
"""
    cs, res = calls(src)
    assert [c["list"] for c in cs] == ["l_instances", "l_instances_2x"]
    assert cs[0]["guards"] == []
    assert [g["text"] for g in cs[1]["guards"]] == ['ck::get_device_name() == "gfx950"']
    stacks = directive_stacks(src.encode())
    assert stacks[5] and stacks[5][0][1] == "#if CK_EXPERIMENTAL_INTER_WAVE_INSTANCES"
    assert stacks[4] == ()  # the directive line itself is outside its section
    assert stacks[12] == ()


_DIRECTIVE_LINES = [
    b"#if A",
    b"  #  ifdef B // c",
    b"#else",
    b"#endif",
    b"#elif C",
    b"x = 1;",
    b"",
    b"\t#endif\r",
    b"# include <x>",
    b"a # if",
    b"#ifndef Q",
    b"#elifdef Z",
    b"#define X #if",
    b"##if",
    b"#iff",
    b"\v#if v",
    b"#else // x",
    b"  y",
    b"\xc3\xa9 #if",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_DIRECTIVE_LINES), max_size=14), st.booleans())
def test_directive_scan_from_the_hash_reads_like_the_line_reader(lines, trailing_newline):
    # directives() finds directives from their `#` (fast); the line-by-line reader (kept for files
    # with continued lines) is the reference
    from ckkb.extract import conditions as cd

    data = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    assert cd._directive_lines(data) == cd._directive_lines_joined(data)
    stacks, _ = cd.directives(data)
    assert len(stacks) == data.count(b"\n") + 2


def test_misread_parameter_list_and_filter_tuple_wrapper():
    src = """
void add_device_z_instances(
    std::vector<std::unique_ptr<DeviceGroupedGemmTileLoop<Row, Row, ck::Tuple<Row>, Row, BF16, I8,
                                                          ck::Tuple<BF16>, BF16, PassThrough>>>& \
instances)
{
    add_device_operation_instances(
        instances, ck::util::filter_tuple_by_modulo_t<\
lst_instances<2, NHWGC, ConvFwdDefault>, Shards, Index>{});
}
"""
    cs, res = calls(src)
    assert [(c["list"], c["args"]) for c in cs] == [
        ("lst_instances", ["2", "NHWGC", "ConvFwdDefault"])
    ]
    f = res.facts["functions"][0]
    assert f["name"] == "add_device_z_instances" and f["interface"].startswith(
        "DeviceGroupedGemmTileLoop<Row"
    )


def test_unbalanced_braces_and_binary_junk_are_reported_with_a_line():
    src = fn("""
    add_device_operation_instances(instances, ok_instances{});
    if(ck::get_device_name() == "gfx950" {
        add_device_operation_instances(instances, bad_instances{});
""")
    cs, res = calls(src)
    assert "ok_instances" in [c["list"] for c in cs]
    assert (
        res.diagnostics
        and res.diagnostics[0].line > 0
        and "malformed" in res.diagnostics[0].message
    )
    res = rg.extract_file("x.cpp", b"\x00\x01ELF\x02junk" * 10)
    assert res.diagnostics[0].message.startswith("binary data")


# ---------------------------------------------------------------- availability evaluation

_DEFS = {"CK_ENABLE_FP8": "1", "ONE": "1", "ZERO": "0"}


@pytest.mark.parametrize(
    "expr, arch, value",
    [
        ({"op": "dev", "cmp": "!=", "arch": "gfx950"}, "gfx950", 0),
        ({"op": "dev", "cmp": "!=", "arch": "gfx950"}, "gfx942", 1),
        ({"op": "cap", "name": "is_xdl_supported"}, "gfx942", 1),
        ({"op": "cap", "name": "is_gfx11_supported"}, "gfx942", 0),
        ({"op": "cap", "name": "no_such_check"}, "gfx942", None),
        ({"op": "defined", "name": "CK_ENABLE_FP8"}, "gfx942", 1),
        ({"op": "macro", "name": "ZERO"}, "gfx942", 0),
        ({"op": "macro", "name": "UNDEFINED"}, "gfx942", 0),
        ({"op": "and", "args": [{"op": "unknown"}, {"op": "int", "value": 0}]}, "gfx942", 0),
        ({"op": "or", "args": [{"op": "unknown"}, {"op": "int", "value": 0}]}, "gfx942", None),
        ({"op": "not", "arg": {"op": "unknown"}}, "gfx942", None),
    ],
)
def test_evaluate_three_valued(expr, arch, value):
    assert av.evaluate(expr, arch, _DEFS, {}) == value


_ARCH = st.sampled_from(["gfx942", "gfx950", "gfx90a"])


@st.composite
def _nest(draw, depth=0):
    """A random nest of device-name ifs (maybe negated, maybe with else) around one call."""
    if depth >= 3 or draw(st.booleans()):
        return None
    return {
        "op": draw(st.sampled_from(["==", "!="])),
        "arch": draw(_ARCH),
        "neg": draw(st.booleans()),
        "swap": draw(st.booleans()),
        "else": draw(st.booleans()),
        "inner": draw(_nest(depth + 1)),
    }


def _render(n) -> tuple[str, list[tuple[bool, str, str, bool]]]:
    if n is None:
        return "add_device_operation_instances(instances, leaf_instances{});", []
    inner, path = _render(n["inner"])
    cmp = (
        f'"{n["arch"]}" {n["op"]} ck::get_device_name()'
        if n["swap"]
        else f'ck::get_device_name() {n["op"]} "{n["arch"]}"'
    )
    cond = f"!({cmp})" if n["neg"] else cmp
    if n["else"]:
        code = f"if({cond}) {{ other(); }} else {{ {inner} }}"
    else:
        code = f"if({cond}) {{ {inner} }}"
    return code, [(n["else"], n["op"], n["arch"], n["neg"]), *path]


@settings(max_examples=150, deadline=None)
@given(_nest(), st.sampled_from(ARCHS))
def test_extracted_guards_evaluate_like_the_source(nest, arch):
    code, path = _render(nest)
    cs, _ = calls(fn(code))
    assert len(cs) == 1
    guards = cs[0]["guards"]
    assert len(guards) == len(path)
    expected = True
    for in_else, op, a, neg in path:
        v = (arch == a) if op == "==" else (arch != a)
        v = not v if neg else v
        expected = expected and (not v if in_else else v)
    failing = av.removing_guards(guards, arch, {}, {})
    assert (not failing) is expected
    for g, (in_else, op, _a, neg) in zip(guards, path, strict=True):
        assert g["kind"] == "device_name" and g["branch"] == ("else" if in_else else "then")
        assert g["op"] == ("only" if (op == "==") != neg else "exclude")


# ---------------------------------------------------------------- the fixture knowledge base


@pytest.fixture(scope="module")
def mini_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("reg") / "kb.db"
    from tests.conftest import FIXTURES

    summary = build(path, {"ck": ck_tree(FIXTURES / "ck_mini")}, jobs=1, stages=pipeline.stages())
    return path, summary


def _avail(db, reg_id):
    return {
        r["arch"]: r
        for r in db.query("SELECT * FROM availability WHERE registration_id = ?", [reg_id])
    }


def test_fixture_registrations_and_bindings(mini_db):
    db = open_db(mini_db[0], readonly=True)
    regs = list(db.query("SELECT * FROM registrations ORDER BY file, line"))
    by = {(r["file"].rsplit("/", 1)[-1], r["line"]): r for r in regs}
    r = by[(f"{P}_comp_default_instance.cpp", 21)]
    assert r["list_name"] == f"{P}_comp_instances_part2" and r["list_id"] is not None
    assert json.loads(r["bindings"]) == {"GemmSpec": "Default"}
    assert r["function"] == f"add_{P}_comp_default_instances"
    mem = [x for x in regs if x["file"].endswith("mem_v1_default_instance.cpp")]
    assert [json.loads(x["bindings"]) for x in mem] == [
        {"BlkGemmPipeSched": "Intrawave", "GemmSpec": "Default"},
        {"BlkGemmPipeSched": "Interwave", "GemmSpec": "Default"},
    ]
    fn_rows = list(
        db.query(
            "SELECT name, interface FROM add_functions WHERE name = ?",
            [f"add_{P}_comp_default_instances"],
        )
    )
    assert (
        fn_rows[0]["interface"]
        == "DeviceGemmV2<Row, Col, Row, BF16, BF16, BF16, PassThrough, PassThrough, PassThrough>"
    )


def test_fixture_gates(mini_db):
    db = open_db(mini_db[0], readonly=True)
    g = list(
        db.query(
            "SELECT kind, effect, arch, dir, line, has_else, "
            "condition FROM gates ORDER BY dir, file, line"
        )
    )
    dn = [
        (x["dir"], x["effect"], x["arch"], bool(x["has_else"]))
        for x in g
        if x["kind"] == "device_name"
    ]
    assert sorted(dn) == [
        ("gemm_mx", "only", "gfx950", False),
        ("gemm_universal", "exclude", "gfx950", False),
        ("gemm_universal", "only", "gfx950", True),
    ]
    assert sorted(x["condition"] for x in g if x["kind"] == "preprocessor") == [
        "#if 0",
        "#if CK_EXPERIMENTAL_INTER_WAVE_INSTANCES",
        "#ifdef CK_ENABLE_FP8",
    ]
    assert [x["condition"] for x in g if x["kind"] == "capability"] == [
        "ck::is_xdl_supported() && !ck::is_gfx11_supported()"
    ]


def test_fixture_availability_layers(mini_db):
    db = open_db(mini_db[0], readonly=True)
    regs = {
        (r["file"].rsplit("/", 1)[-1], r["list_name"].rsplit("_", 1)[-1], r["line"]): r["id"]
        for r in db.query("SELECT id, file, list_name, line FROM registrations")
    }

    def reg(file_part, line):
        return next(v for k, v in regs.items() if file_part in k[0] and k[2] == line)

    part2 = _avail(db, reg("comp_default", 21))
    assert part2["gfx942"]["available"] == 1
    assert (part2["gfx950"]["layer"], part2["gfx950"]["line"], part2["gfx950"]["condition"]) == (
        "registration",
        19,
        'if(ck::get_device_name() != "gfx950")',
    )
    assert (
        part2["gfx908"]["layer"] == "build" and part2["gfx908"]["file"] == f"{GPU}/CMakeLists.txt"
    )
    else_branch = _avail(db, reg("comp_kpadding", 24))
    assert else_branch["gfx950"]["layer"] == "registration" and else_branch["gfx950"][
        "condition"
    ].startswith("else of if(")
    assert else_branch["gfx942"]["available"] == 1
    only = _avail(db, reg("comp_kpadding", 18))
    assert [a for a in ARCHS if only[a]["available"]] == ["gfx950"]
    if0 = _avail(db, reg("mem_v2", 22))
    assert {only_[1]["layer"] for only_ in if0.items() if only_[0] != "gfx908"} == {"preprocessor"}
    assert if0["gfx942"]["condition"] == "#if 0" and if0["gfx942"]["line"] == 21
    fp8 = _avail(db, reg("mem_v2", 16))
    assert fp8["gfx942"]["available"] == 1  # CK_ENABLE_* are on in a default build
    inter = _avail(db, reg("mem_v1", 20))
    assert (
        inter["gfx942"]["available"] == 1
    )  # ck.hpp defines CK_EXPERIMENTAL_INTER_WAVE_INSTANCES 1
    cap = _avail(db, reg("comp_mnkpadding", 18))
    assert cap["gfx942"]["available"] == 1 and cap["gfx950"]["available"] == 1
    # the fixture's device_prop.hpp says is_xdl_supported is gfx9-only (real CK: gfx11/12 too)
    assert cap["gfx1200"]["layer"] == "capability" and cap["gfx1200"]["line"] == 16
    assert cap["gfx1100"]["layer"] == "capability"


def test_unresolved_list_is_kept_with_a_diagnostic(mini_db):
    path, summary = mini_db
    db = open_db(path, readonly=True)
    mx = list(db.query("SELECT * FROM registrations WHERE dir = 'gemm_mx'"))
    assert len(mx) == 1 and mx[0]["list_id"] is None
    a = _avail(db, mx[0]["id"])
    assert a["gfx950"]["available"] == 1
    assert a["gfx942"]["layer"] == "build" and "ONLY MX_KERNELS" in a["gfx942"]["condition"]
    assert any(
        "not found" in d.message
        and d.file.endswith("mk_nk_mn_default_instance.cpp")
        and d.line == 14
        for d in summary.diagnostics
    )


def test_add_function_in_a_header_is_built_through_its_includers(copy_tree, tmp_path):
    root = copy_tree("ck_mini")
    d = root / GPU / "gemm_universal" / "device_gemm_xdl_universal_bf16_bf16_bf16"
    (d / "device_gemm_xdl_universal_bf16_bf16_bf16_templated.hpp").write_text(
        "template <typename T>\nvoid "
        "add_device_templated_instances(std::vector<std::unique_ptr<DeviceGemmV2<T>>>& instances)\n"
        "{\n    add_device_operation_instances(instances, "
        "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances<GemmDefault>{});\n}\n"
    )
    (d / "device_gemm_xdl_universal_bf16_bf16_bf16_templated_instance.cpp").write_text(
        '#include "device_gemm_xdl_universal_bf16_bf16_bf16_templated.hpp"\n'
        "void "
        "add_device_templated_bf16_instances(std::vector<std::unique_ptr<DeviceGemmV2<BF16>>>& "
        "instances)\n"
        "{\n    add_device_templated_instances<BF16>(instances);\n}\n"
    )
    with (d.parent / "CMakeLists.txt").open("a") as f:  # a source CMake names, so it is built
        f.write(
            "add_instance_library(device_gemm_templated_instance "
            "device_gemm_xdl_universal_bf16_bf16_bf16/"
            "device_gemm_xdl_universal_bf16_bf16_bf16_templated_instance.cpp)\n"
        )
    path = tmp_path / "kb.db"
    build(path, {"ck": ck_tree(root)}, jobs=1, stages=pipeline.stages())
    db = open_db(path, readonly=True)
    (reg,) = db.query(
        "SELECT id, file FROM registrations WHERE function = 'add_device_templated_instances'"
    )
    assert reg["file"].endswith("_templated.hpp")
    a = _avail(db, reg["id"])
    assert a["gfx942"]["available"] == 1
    # the including .cpp has `_xdl` in its name: the fixture's CMake drops it for gfx908
    assert (
        a["gfx908"]["layer"] == "build" and a["gfx908"]["condition"] == 'source_name MATCHES "_xdl"'
    )
