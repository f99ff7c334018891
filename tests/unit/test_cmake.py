"""ck.cmake: the Lark condition grammar, the small CMake interpreter, per-arch build rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb.extract import cmake as cm
from ckkb.extract.cmake import And, Arg, Binary, Not, Or, Truth, Unary
from ckkb.kb.stages import BuildContext

GPU = "library/src/tensor_operation_instance/gpu"

# ---------------------------------------------------------------- grammar


def test_precedence_or_and_not():
    c = cm.parse_condition('NOT A AND B OR C MATCHES "x"')
    assert c == Or(
        And(Not(Truth(Arg("A"))), Truth(Arg("B"))), Binary("MATCHES", Arg("C"), Arg("x", True))
    )


def test_parentheses_and_quoted_and_vars():
    c = cm.parse_condition(
        '("${cmake_instance}" MATCHES "ONLY XDL_KERNELS") AND (NOT DEFINED DL_KERNELS)'
    )
    assert c == And(
        Binary("MATCHES", Arg("${cmake_instance}", True), Arg("ONLY XDL_KERNELS", True)),
        Not(Unary("DEFINED", Arg("DL_KERNELS"))),
    )


def test_operator_words_are_whole_words():
    # MATCHESX and NOTE are arguments, not operators
    assert cm.parse_condition("NOTE") == Truth(Arg("NOTE"))
    assert cm.parse_condition("a STREQUAL MATCHESX") == Binary(
        "STREQUAL", Arg("a"), Arg("MATCHESX")
    )


def test_multiline_condition_with_comment():
    c = cm.parse_condition('NOT (x MATCHES "a" OR\n   # why\n   y MATCHES "b")')
    assert c == Not(
        Or(Binary("MATCHES", Arg("x"), Arg("a", True)), Binary("MATCHES", Arg("y"), Arg("b", True)))
    )


@pytest.mark.parametrize("bad", ["", "NOT", "a AND", "(a", "a MATCHES", "a b c"])
def test_bad_conditions_raise_with_position(bad):
    with pytest.raises(cm.ConditionError) as e:
        cm.parse_condition(bad)
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
    assert cm.evaluate(cm.parse_condition(text), env) is expected


# ---------------------------------------------------------------- property tests

_names = st.sampled_from(["A", "B", "INST_TARGETS", "source_name", "DL_KERNELS", "x_1"])
_values = st.sampled_from(["gfx942", "gfx950", "_mx", "ON", "OFF", "1", "0", "", "a b"])
_args = st.one_of(
    st.builds(lambda n: Arg(n), _names),
    st.builds(lambda v: Arg(v, True), _values),
    st.builds(lambda n: Arg("${" + n + "}"), _names),
)
_leaf = st.one_of(
    st.builds(Truth, _args),
    st.builds(Unary, st.sampled_from(["DEFINED", "EXISTS"]), _args),
    st.builds(Binary, st.sampled_from(["MATCHES", "STREQUAL", "EQUAL"]), _args, _args),
)
_cond = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.builds(Not, inner), st.builds(And, inner, inner), st.builds(Or, inner, inner)
    ),
    max_leaves=12,
)
_env = st.dictionaries(_names, _values, max_size=6)


@settings(max_examples=300, deadline=None)
@given(_cond)
def test_roundtrip_text_parse_same_ast(c):
    assert cm.parse_condition(cm.condition_text(c)) == c


@settings(max_examples=300, deadline=None)
@given(_cond, _env)
def test_roundtrip_same_evaluation(c, env):
    again = cm.parse_condition(cm.condition_text(c))
    assert cm.evaluate(again, env) == cm.evaluate(c, env)


@settings(max_examples=200, deadline=None)
@given(_cond, _env)
def test_not_negates_and_de_morgan(c, env):
    assert cm.evaluate(Not(c), env) is (not cm.evaluate(c, env))
    d = And(c, Not(c))
    assert cm.evaluate(d, env) is False
    assert cm.evaluate(Not(Or(c, c)), env) == cm.evaluate(And(Not(c), Not(c)), env)


# ---------------------------------------------------------------- statements


def test_tokenize_lines_and_args():
    cmds = cm.tokenize('set(a "x y" ${b})\n# comment\nlist(REMOVE_ITEM ARGN\n  "${s}")\n')
    assert [(c.name, c.line) for c in cmds] == [("set", 1), ("list", 3)]
    assert cmds[0].args == [Arg("a"), Arg("x y", True), Arg("${b}")]


@pytest.mark.parametrize(
    "text, line", [("if(a)\nset(x 1)\n", 1), ('set(a "open\n', 1), ("endif()\n", 1), ("set(a\n", 1)]
)
def test_cmake_syntax_errors_name_a_line(text, line):
    with pytest.raises(cm.CMakeSyntaxError) as e:
        cm.parse_cmake(text)
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
    stmts, diags = cm.parse_cmake(
        "set(r 0)\nif(a MATCHES)\n  set(r 1)\nelse()\n  set(r 2)\nendif()\n"
    )
    assert diags and diags[0].line == 2
    it = cm.Interpreter({}, "f")
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
    stmts, _ = cm.parse_cmake(text)
    it = cm.Interpreter({}, "f")
    it.run(stmts)
    assert "seen" not in it.env  # set inside the function stays there
    fn = it.functions["f"]
    body = cm.Interpreter({"NAME": "n", "ARGN": "a;b;c;stop;d"}, "f")
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


# ---------------------------------------------------------------- memos: same answers as running everything


def test_expand_memo_follows_the_variables_it_read():
    assert cm.expand("${a}-${b}", {"a": "1", "b": "x"}) == "1-x"
    assert cm.expand("${a}-${b}", {"a": "2", "b": "x"}) == "2-x"
    assert cm.expand("${a}-${b}", {"a": "2"}) == "2-"
    env = {"x": "${y}", "y": "1"}  # a value that itself expands: the inner variable counts too
    assert cm.expand("${x}", env) == "1"
    env["y"] = "2"
    assert cm.expand("${x}", env) == "2"


def _library(text: str) -> cm.Function:
    lib = cm._library_function(cm.parse_cmake(text)[0])
    assert lib is not None
    return lib


def _verdicts_agree(
    lib: cm.Function, sources: list[str], env: dict[str, str]
) -> cm._LibraryVerdicts:
    verdicts = cm._LibraryVerdicts(
        lib, cm._library_flow(lib), env, "gfx942", lambda br: br and br.line, {}
    )
    for s in sources:  # once per source, as evaluate_tree did before the classes
        assert verdicts(s) == cm._run_library(lib, env, s, "gfx942", lambda br: br and br.line), s
    return verdicts


SOURCES = [
    "g/a_wmma_x.cpp",
    "g/b_dl_x.cpp",
    "g/c_xdl.cpp",
    "g/sub/d_dl.cpp",
    "g/e.cpp",
    "g/f_wmma_dl.cpp",
    "g/ON",
    "g/x;y.cpp",
    "g/CACHE",
]


def test_library_classes_run_once_per_class():
    env = dict(cm.DEFAULT_ENV, SUPPORTED_GPU_TARGETS="gfx942", GPU_TARGETS="gfx942")
    v = _verdicts_agree(_library(LIB), SOURCES, env)
    assert v.signatures is not None and len(v.by_class) < len(SOURCES)
    assert (
        v.signatures["x;y.cpp"] is None and v.signatures["CACHE"] is None
    )  # not one plain list item: run alone


@pytest.mark.parametrize(
    "use",
    [
        'if(source_name STREQUAL "c_xdl.cpp")\n list(REMOVE_ITEM ARGN "${source}")\n endif()',  # not a probe
        "list(REMOVE_ITEM ARGN c_xdl.cpp)",  # compares the source with a constant
        'set(p "x${source_name}")\n if(p MATCHES "x_dl")\n list(REMOVE_ITEM ARGN "${source}")\n endif()',
        'set(v "${source_name}")\n if(v MATCHES "${SUPPORTED_GPU_TARGETS}")\n list(REMOVE_ITEM ARGN "${source}")\n endif()',
    ],
)
def test_library_classes_fall_back_when_the_source_is_looked_at_otherwise(use):
    text = LIB.replace("  endforeach()\nendfunction()", f"  {use}\n  endforeach()\nendfunction()")
    assert use in text
    env = dict(cm.DEFAULT_ENV, SUPPORTED_GPU_TARGETS="gfx942", GPU_TARGETS="gfx942")
    v = _verdicts_agree(_library(text), SOURCES + ["c_xdl.cpp", "g/c_xdl.cpp"], env)
    assert v.signatures is None


def test_library_classes_skip_branches_the_arch_decides():
    text = LIB.replace(
        "  foreach(source IN LISTS ARGN)\n",
        (
            '  if(DEFINED DTYPES)\n    foreach(s IN LISTS ARGN)\n      if(s STREQUAL "${DTYPES}")\n'
            '        list(REMOVE_ITEM ARGN "${s}")\n      endif()\n    endforeach()\n  endif()\n'
            "  foreach(source IN LISTS ARGN)\n"
        ),
        1,
    )
    env = dict(cm.DEFAULT_ENV, SUPPORTED_GPU_TARGETS="gfx942", GPU_TARGETS="gfx942")
    assert (
        _verdicts_agree(_library(text), SOURCES, env).signatures is not None
    )  # DTYPES undefined: never run
    assert _verdicts_agree(_library(text), SOURCES, dict(env, DTYPES="e.cpp")).signatures is None


def test_library_classes_fall_back_when_a_reference_could_form_at_run_time():
    env = dict(cm.DEFAULT_ENV, SUPPORTED_GPU_TARGETS="gfx942", GPU_TARGETS="gfx942", X="a$")
    assert _verdicts_agree(_library(LIB), SOURCES, env).signatures is None
    env["X"] = "$ENV{ROCM_PATH};/opt/rocm"  # a `$` no cut can put before `{`
    assert _verdicts_agree(_library(LIB), SOURCES, env).signatures is not None


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


@pytest.mark.parametrize(
    "cond", ['"${v}" MATCHES "_xdl"', 'v MATCHES "^a.c$"', 'v MATCHES "["', "v"]
)
def test_probe_test_agrees_with_the_compiled_condition(cond):
    leaf = cm.parse_condition(cond)
    probe = cm._probe_test(leaf, "v")
    for value in ["x_xdl.cpp", "abc", "a", "ON", "0", ""]:
        assert probe(value) == cm.evaluate(leaf, {"v": value})


def test_matches_memo_is_per_text_and_forgotten():
    leaf = cm.parse_condition('"${t}" MATCHES "gemm"')
    assert cm.evaluate(leaf, {"t": "a gemm b"}) and not cm.evaluate(leaf, {"t": "conv"})
    assert any(memo for memo in cm._MATCH_MEMOS)
    cm.forget_matches()
    assert not any(cm._MATCH_MEMOS)
