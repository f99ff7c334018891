"""ck.cmake: the Lark condition grammar, the small CMake interpreter, per-arch build rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb.extract import cmake as cm
from ckkb.kb.stages import BuildContext
from ckkb.lang.cmake.conditions import (
    EXPAND_ROUNDS,
    And,
    Arg,
    Binary,
    ConditionError,
    Not,
    Or,
    Truth,
    Unary,
    condition_text,
    evaluate,
    expand,
    parse_condition,
)
from ckkb.lang.cmake.interpreter import Interpreter
from ckkb.lang.cmake.syntax import CMakeSyntaxError, Function, parse_cmake, tokenize
from tests.cmake_conditions import conditions

GPU = "library/src/tensor_operation_instance/gpu"

# ---------------------------------------------------------------- grammar


def test_precedence_or_and_not():
    c = parse_condition('NOT A AND B OR C MATCHES "x"')
    assert c == Or(
        And(Not(Truth(Arg("A"))), Truth(Arg("B"))), Binary("MATCHES", Arg("C"), Arg("x", True))
    )


def test_parentheses_and_quoted_and_vars():
    c = parse_condition(
        '("${cmake_instance}" MATCHES "ONLY XDL_KERNELS") AND (NOT DEFINED DL_KERNELS)'
    )
    assert c == And(
        Binary("MATCHES", Arg("${cmake_instance}", True), Arg("ONLY XDL_KERNELS", True)),
        Not(Unary("DEFINED", Arg("DL_KERNELS"))),
    )


def test_operator_words_are_whole_words():
    # MATCHESX and NOTE are arguments, not operators
    assert parse_condition("NOTE") == Truth(Arg("NOTE"))
    assert parse_condition("a STREQUAL MATCHESX") == Binary("STREQUAL", Arg("a"), Arg("MATCHESX"))


def test_multiline_condition_with_comment():
    c = parse_condition('NOT (x MATCHES "a" OR\n   # why\n   y MATCHES "b")')
    assert c == Not(
        Or(Binary("MATCHES", Arg("x"), Arg("a", True)), Binary("MATCHES", Arg("y"), Arg("b", True)))
    )


@pytest.mark.parametrize("bad", ["", "NOT", "a AND", "(a", "a MATCHES", "a b c"])
def test_bad_conditions_raise_with_position(bad):
    with pytest.raises(ConditionError) as e:
        parse_condition(bad)
    assert e.value.line >= 1


# ---------------------------------------------------------------- evaluation semantics


@pytest.mark.parametrize(
    "text, env, expected",
    [
        ('INST_TARGETS MATCHES "gfx9"', {"INST_TARGETS": "gfx942"}, True),
        ('INST_TARGETS MATCHES "gfx9"', {"INST_TARGETS": "gfx1100"}, False),
        (
            '"INST_TARGETS" MATCHES "gfx9"',
            {"INST_TARGETS": "gfx942"},
            False,
        ),  # quoted: never a variable
        ('NOT INST_TARGETS MATCHES "gfx94|gfx95|gfx12"', {"INST_TARGETS": "gfx950"}, False),
        ("NOT CK_USE_FP8_ON_UNSUPPORTED_ARCH", {"CK_USE_FP8_ON_UNSUPPORTED_ARCH": "OFF"}, True),
        ("NOT CK_USE_FP8_ON_UNSUPPORTED_ARCH", {}, True),
        ("DEFINED DTYPES", {}, False),
        ("DEFINED DTYPES", {"DTYPES": "fp16"}, True),
        ("test EQUAL 1", {"test": "1"}, True),
        ("test EQUAL 1", {"test": "0"}, False),
        ("${v} GREATER 600241132", {"v": "600300000"}, True),
        ("ARGN", {"ARGN": "a.cpp"}, True),
        ("ARGN", {"ARGN": ""}, False),
        ('"${source_name}" MATCHES "_mx"', {"source_name": "x_mx_y.cpp"}, True),
        ("ON", {}, True),
        ("0", {}, False),
        ("x-NOTFOUND", {}, False),
        ('1.2.3 VERSION_LESS "1.10"', {}, True),
    ],
)
def test_evaluate(text, env, expected):
    assert evaluate(parse_condition(text), env) is expected


# ---------------------------------------------------------------- property tests

_names = st.sampled_from(["A", "B", "INST_TARGETS", "source_name", "DL_KERNELS", "x_1"])
_values = st.sampled_from(["gfx942", "gfx950", "_mx", "ON", "OFF", "1", "0", "", "a b"])
_args = st.one_of(
    st.builds(lambda n: Arg(n), _names),
    st.builds(lambda v: Arg(v, True), _values),
    st.builds(lambda n: Arg("${" + n + "}"), _names),
)
_cond = conditions(_args, ["DEFINED", "EXISTS"], ["MATCHES", "STREQUAL", "EQUAL"], max_leaves=12)
_env = st.dictionaries(_names, _values, max_size=6)


@settings(max_examples=300, deadline=None)
@given(_cond)
def test_roundtrip_text_parse_same_ast(c):
    assert parse_condition(condition_text(c)) == c


@settings(max_examples=300, deadline=None)
@given(_cond, _env)
def test_roundtrip_same_evaluation(c, env):
    again = parse_condition(condition_text(c))
    assert evaluate(again, env) == evaluate(c, env)


@settings(max_examples=200, deadline=None)
@given(_cond, _env)
def test_not_negates_and_de_morgan(c, env):
    assert evaluate(Not(c), env) is (not evaluate(c, env))
    d = And(c, Not(c))
    assert evaluate(d, env) is False
    assert evaluate(Not(Or(c, c)), env) == evaluate(And(Not(c), Not(c)), env)


# ---------------------------------------------------------------- statements


def test_tokenize_lines_and_args():
    cmds = tokenize('set(a "x y" ${b})\n# comment\nlist(REMOVE_ITEM ARGN\n  "${s}")\n')
    assert [(c.name, c.line) for c in cmds] == [("set", 1), ("list", 3)]
    assert cmds[0].args == [Arg("a"), Arg("x y", True), Arg("${b}")]


@pytest.mark.parametrize(
    "text, line", [("if(a)\nset(x 1)\n", 1), ('set(a "open\n', 1), ("endif()\n", 1), ("set(a\n", 1)]
)
def test_cmake_syntax_errors_name_a_line(text, line):
    with pytest.raises(CMakeSyntaxError) as e:
        parse_cmake(text)
    assert e.value.line == line


def test_stage_reports_syntax_error_with_file_and_line():
    res = cm.STAGE.extract(
        Path("/x"), f"{GPU}/CMakeLists.txt", b"function(add_instance_library N)\n  if(a\n"
    )
    assert res.diagnostics and res.diagnostics[0].file == f"{GPU}/CMakeLists.txt"
    assert res.diagnostics[0].severity == "error"
    res = cm.STAGE.extract(Path("/x"), f"{GPU}/CMakeLists.txt", b"\x00\x01\x02binary")
    assert "binary" in res.diagnostics[0].message


def test_unparsable_if_is_a_warning_and_never_taken():
    stmts, diags = parse_cmake("set(r 0)\nif(a MATCHES)\n  set(r 1)\nelse()\n  set(r 2)\nendif()\n")
    assert diags and diags[0].line == 2
    it = Interpreter({}, "f")
    it.run(stmts)
    assert it.env["r"] == "2"


def test_interpreter_foreach_break_function_and_lists():
    text = """
function(f NAME)
  set(out)
  foreach(s IN LISTS ARGN)
    if(s MATCHES "stop")
      break()
    endif()
    list(APPEND out ${s})
  endforeach()
  list(REMOVE_ITEM out b)
  set(result ${out} PARENT_SCOPE)
  set(seen ${out})
endfunction()
f(n a b c stop d)
"""
    stmts, _ = parse_cmake(text)
    it = Interpreter({}, "f")
    it.run(stmts)
    assert "seen" not in it.env  # set inside the function stays there
    fn = it.functions["f"]
    body = Interpreter({"NAME": "n", "ARGN": "a;b;c;stop;d"}, "f")
    body.run(fn.body)
    assert body.env["seen"] == "a;c"  # break() stopped at "stop"; REMOVE_ITEM dropped b
    assert body.removed[("out", "b")] is None  # removed outside any if()


# ---------------------------------------------------------------- per-arch evaluation on trees


def _rows(root: Path):
    stage = cm.STAGE
    results = {}
    for p in stage.files(root):
        rel = p.relative_to(root).as_posix()
        results[rel] = stage.extract(root, rel, p.read_bytes())
    out = stage.combine(root, results, BuildContext(trees={}))
    return out


def test_fixture_build_rules_and_file_builds(fixtures):
    root = fixtures / "ck_mini"
    out = _rows(root)
    rules = {r.line: r for r in out.rows if type(r).__name__ == "BuildRuleRow"}
    builds = {
        (r.file.rsplit("/", 1)[-1], r.arch): r
        for r in out.rows
        if type(r).__name__ == "FileBuildRow"
    }
    actions = sorted((r.action, r.condition) for r in rules.values())
    assert (
        "remove_source",
        'NOT INST_TARGETS MATCHES "gfx950" AND source_name MATCHES "_mx"',
    ) in actions
    assert ("remove_targets", 'source_name MATCHES "_xdl"') in actions
    assert ("remove_targets", 'source_name MATCHES "_wmma"') in actions
    assert any(a == "skip_directory" and "ONLY MX_KERNELS" in c for a, c in actions)
    xdl_rule = next(r for r in rules.values() if r.condition == 'source_name MATCHES "_xdl"')
    assert xdl_rule.targets == ["gfx900", "gfx906", "gfx908", "gfx1030"]
    assert next(r for r in rules.values() if "_wmma" in r.condition).targets == [
        "FILTER INCLUDE REGEX gfx1[12]"
    ]

    comp = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_default_instance.cpp"
    assert builds[(comp, "gfx942")].built and builds[(comp, "gfx950")].built
    off = builds[(comp, "gfx908")]
    assert not off.built and off.line == xdl_rule.line and off.rule_id == xdl_rule.id

    mx = "device_gemm_mx_xdl_f8_f8_bf16_mk_nk_mn_default_instance.cpp"
    assert builds[(mx, "gfx950")].built
    for arch in ("gfx942", "gfx90a", "gfx1100"):
        b = builds[(mx, arch)]
        assert not b.built and "ONLY MX_KERNELS" in b.condition  # the directory is skipped first


def _tree(
    tmp_path: Path, gpu_cmake: str, files: dict[str, str], root_cmake: str | None = None
) -> Path:
    root = tmp_path / "ck"
    (root / GPU).mkdir(parents=True)
    (root / "include" / "ck").mkdir(parents=True)
    (root / GPU / "CMakeLists.txt").write_text(gpu_cmake)
    if root_cmake is not None:
        (root / "CMakeLists.txt").write_text(root_cmake)
    for rel, text in files.items():
        p = root / GPU / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


LIB = """
function(add_instance_library INSTANCE_NAME)
  set(INST_TARGETS ${SUPPORTED_GPU_TARGETS})
  foreach(source IN LISTS ARGN)
    get_filename_component(source_name ${source} NAME)
    if(NOT DEFINED DL_KERNELS AND source_name MATCHES "_dl")
      list(REMOVE_ITEM ARGN "${source}")
    endif()
  endforeach()
  foreach(source IN LISTS ARGN)
    get_filename_component(source_name ${source} NAME)
    set(INST_TARGETS ${SUPPORTED_GPU_TARGETS})
    if(source_name MATCHES "_wmma")
      list(FILTER INST_TARGETS INCLUDE REGEX "gfx1[12]")
    endif()
  endforeach()
endfunction()
"""


def test_filter_regex_and_root_environment(tmp_path):
    root_cmake = """
option(DISABLE_DL_KERNELS "no DL" OFF)
if(NOT DISABLE_DL_KERNELS)
  add_definitions(-DDL_KERNELS)
  set(DL_KERNELS "ON")
endif()
if(SUPPORTED_GPU_TARGETS MATCHES "gfx94" OR SUPPORTED_GPU_TARGETS MATCHES "gfx95")
  add_definitions(-DCK_USE_GFX94)
endif()
"""
    root = _tree(
        tmp_path,
        LIB,
        {"g/a_wmma_x.cpp": "", "g/b_dl_x.cpp": "", "g/CMakeLists.txt": ""},
        root_cmake,
    )
    out = _rows(root)
    b = {
        (r.file.rsplit("/", 1)[-1], r.arch): r.built
        for r in out.rows
        if type(r).__name__ == "FileBuildRow"
    }
    assert b[("a_wmma_x.cpp", "gfx1100")] and b[("a_wmma_x.cpp", "gfx1201")]
    assert not b[("a_wmma_x.cpp", "gfx942")]
    assert b[("b_dl_x.cpp", "gfx942")]  # DL_KERNELS is ON by the root's default
    defs = {(r.arch, r.name) for r in out.rows if type(r).__name__ == "BuildDefineRow"}
    assert ("gfx942", "CK_USE_GFX94") in defs and ("gfx950", "CK_USE_GFX94") in defs
    assert ("gfx90a", "CK_USE_GFX94") not in defs
    assert ("gfx908", "DL_KERNELS") in defs


def test_without_root_cmake_dl_sources_are_dropped(tmp_path):
    root = _tree(tmp_path, LIB, {"g/b_dl_x.cpp": "", "g/CMakeLists.txt": ""})
    out = _rows(root)
    b = {r.arch: r for r in out.rows if type(r).__name__ == "FileBuildRow"}
    assert not b["gfx942"].built and "_dl" in b["gfx942"].condition


def test_missing_gpu_cmake_is_a_warning(tmp_path):
    root = tmp_path / "ck"
    (root / GPU / "x").mkdir(parents=True)
    out = _rows(root)
    assert not [r for r in out.rows if type(r).__name__ == "FileBuildRow"]
    assert out.diagnostics and "no build rules" in out.diagnostics[0].message


# ---------------------------------------------------------------- add_instance_library verdicts


def test_expand_ends_on_values_that_refer_back():
    """A value naming itself, directly or through another, once expanded forever."""
    assert expand("${a}", {"a": "${b}", "b": "${a}"}) in {"${a}", "${b}"}
    assert expand("[${a}]", {"a": "${a}"}) == "[${a}]"
    grown = expand("${a}", {"a": "x${a}"})  # grows by one x a round, up to the rounds' bound
    assert grown.endswith("${a}") and grown.count("x") == EXPAND_ROUNDS


def test_expand_reads_values_that_expand_again():
    assert expand("${a}-${b}", {"a": "1", "b": "x"}) == "1-x"
    assert expand("${a}-${b}", {"a": "2"}) == "2-"
    env = {"x": "${y}", "y": "1"}  # a value that itself expands: the inner variable counts too
    assert expand("${x}", env) == "1"
    env["y"] = "2"
    assert expand("${x}", env) == "2"


def _library(text: str) -> Function:
    lib = cm._library_function(parse_cmake(text)[0])
    assert lib is not None
    return lib


def _verdict(lib: Function, source: str, env: dict[str, str]) -> tuple[bool, int | None]:
    """(built, line of the rule that removed it) for one source on gfx942."""
    return cm._run_library(lib, env, source, "gfx942", lambda br: br and br.line)


# Expected verdicts read off LIB by hand (its line 1 is empty): `_dl` sources are removed by the
# if() on line 6 (DL_KERNELS undefined without a root CMakeLists.txt); `_wmma` sources keep only
# gfx11/gfx12 (FILTER in the if() on line 13), so gfx942 is dropped; `x;y.cpp` becomes two list
# items, neither of which is the source, so it is gone with no rule; the rest are built.
SOURCES = {
    "g/a_wmma_x.cpp": (False, 13),
    "g/b_dl_x.cpp": (False, 6),
    "g/c_xdl.cpp": (True, None),
    "g/sub/d_dl.cpp": (False, 6),
    "g/e.cpp": (True, None),
    "g/f_wmma_dl.cpp": (False, 6),
    "g/ON": (True, None),
    "g/x;y.cpp": (False, None),
    "g/CACHE": (True, None),
}


def test_library_verdicts_per_source():
    env = dict(cm.DEFAULT_ENV, SUPPORTED_GPU_TARGETS="gfx942", GPU_TARGETS="gfx942")
    lib = _library(LIB)
    assert {s: _verdict(lib, s, env) for s in SOURCES} == SOURCES
    dl = dict(env, DL_KERNELS="ON")
    assert _verdict(lib, "g/b_dl_x.cpp", dl) == (True, None)


@pytest.mark.parametrize(
    "use, verdict",
    [
        (
            'if(source_name STREQUAL "c_xdl.cpp")\n list(REMOVE_ITEM ARGN "${source}")\n endif()',
            (False, 16),
        ),
        ("list(REMOVE_ITEM ARGN c_xdl.cpp)", (False, None)),  # outside any if()
        (
            'set(p "x${source_name}")\n if(p MATCHES "xc_x")\n list(REMOVE_ITEM ARGN "${source}")'
            "\n endif()",
            (False, 17),
        ),
        (
            'set(v "${source_name}")\n if(v MATCHES "${SUPPORTED_GPU_TARGETS}")\n'
            ' list(REMOVE_ITEM ARGN "${source}")\n endif()',
            (True, None),
        ),
    ],
)
def test_library_verdicts_other_looks_at_the_source(use, verdict):
    text = LIB.replace("  endforeach()\nendfunction()", f"  {use}\n  endforeach()\nendfunction()")
    assert use in text
    env = dict(cm.DEFAULT_ENV, SUPPORTED_GPU_TARGETS="gfx942", GPU_TARGETS="gfx942")
    assert _verdict(_library(text), "g/c_xdl.cpp", env) == verdict
    assert _verdict(_library(text), "g/e.cpp", env) == (True, None)


def test_instance_sources_in_list_files_order(tmp_path):
    from ckkb.extract.files import list_files

    for rel in [
        "a/x.cpp",
        "a-b/y.cpp",
        "a/b/z.in",
        "a.b/q.cpp",
        "A/w.cpp",
        "a/b-c/k.cpp",
        "a/bc.cpp",
        "t.cpp",
        "a/n.hpp",
    ]:
        (tmp_path / GPU / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / GPU / rel).write_text("")
    (tmp_path / GPU / "lnk").symlink_to(tmp_path / GPU / "a")  # not entered, as list_files does
    base = tmp_path / GPU
    want = [str(p)[len(str(base)) + 1 :] for p in list_files(tmp_path, GPU, cm.SOURCE_SUFFIXES)]
    assert cm.instance_sources(base) == want
    assert cm.instance_sources(tmp_path / "missing") == []
