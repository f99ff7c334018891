"""Issue 13, the build layer run as CMake runs it: include() of `.cmake` files (module path,
relative, OPTIONAL), a function() defined inside an if() (evaluated per arch), and
add_instance_library run once per call with the call's whole ARGN.

Expected verdicts are read off the fixture texts by hand (each test says which); rule lines are
found by grep in the fixture's files (`_line`), apart from the extractor.
"""

from __future__ import annotations

import re
from pathlib import Path

from ckkb.archs import ARCHS
from ckkb.extract import cmake as cm
from ckkb.kb.stages import BuildContext
from ckkb.lang.cmake.interpreter import Interpreter
from ckkb.lang.cmake.syntax import Stmt, parse_cmake
from tests.overlays import fixture_file, overlay_tree

GPU = "library/src/tensor_operation_instance/gpu"
INC = "library/src/inc_ops"


def _line(text: str, pattern: str) -> int:
    """Second method: the 1-based line of the first match of `pattern` in `text`."""
    return next(i + 1 for i, ln in enumerate(text.splitlines()) if re.search(pattern, ln))


def _stage(root: Path) -> tuple[dict[tuple[str, str], object], list[Path]]:
    """Run the ck.cmake stage on `root`: (file name, arch) -> FileBuildRow, and its files."""
    results = {}
    files = cm.STAGE.files(root)
    for p in files:
        rel = p.relative_to(root).as_posix()
        results[rel] = cm.STAGE.extract(root, rel, p.read_bytes())
    out = cm.STAGE.combine(root, results, BuildContext(trees={}))
    rows = {
        (r.file.rsplit("/", 1)[-1], r.arch): r
        for r in out.rows
        if type(r).__name__ == "FileBuildRow"
    }
    return rows, files


def _built(rows: dict, name: str) -> list[str]:
    return [a for a in ARCHS if rows[(name, a)].built]


# ---------------------------------------------------------------- include()


def test_rules_in_included_files_count(tmp_path):
    """tests/fixtures/ck_include (its README has the table): add_instance_library comes from a
    module on CMAKE_MODULE_PATH, the variable it tests from a file included relative to the
    root, the library's arch list from a file the directory includes."""
    root = overlay_tree(tmp_path, "ck_include")
    rows, files = _stage(root)
    wmma, xdl = "device_gemm_inc_wmma_instance.cpp", "device_gemm_inc_xdl_instance.cpp"
    assert _built(rows, wmma) == []
    assert _built(rows, xdl) == ["gfx90a", "gfx942"]
    module = "cmake/InstanceLibrary.cmake"
    r = rows[(wmma, "gfx942")]
    assert (r.line, r.condition) == (
        _line(fixture_file("ck_include", module).read_text(), "if\\(source MATCHES"),
        'source MATCHES "${INC_SKIP}"',
    )
    archs = f"{INC}/gemm_inc/archs.cmake"
    r = rows[(xdl, "gfx1100")]
    assert r.line == _line(fixture_file("ck_include", archs).read_text(), "offload-arch")
    assert "--offload-arch=gfx942" in r.condition
    # the included files are inputs of the stage: a change to one rebuilds
    rels = {p.relative_to(root).as_posix() for p in files}
    assert {module, f"{INC}/options.cmake", archs} <= rels


def _interp(files: dict[str, str], text: str, env: dict[str, str] | None = None) -> Interpreter:
    class Load:
        root = "/t"

        def __call__(self, path: str) -> list[Stmt] | None:
            rel = path[len("/t/") :]
            return parse_cmake(files[rel])[0] if rel in files else None

    it = Interpreter(dict(env or {}), "d/CMakeLists.txt", load=Load())
    it.run(parse_cmake(text)[0])
    return it


def test_include_finds_modules_then_paths_as_cmake_does():
    """A name is a module `<name>.cmake` on CMAKE_MODULE_PATH first, else a path relative to
    the current source directory (d/); the included file runs in the same scope with its own
    CMAKE_CURRENT_LIST_DIR (a -D it adds names its file); RESULT_VARIABLE says what was read,
    NOTFOUND for none."""
    files = {
        "m/x.cmake": "set(from module)\nset(dir ${CMAKE_CURRENT_LIST_DIR})\n"
        "add_definitions(-DFROM_MODULE)\n",
        "d/x": "set(from relative)\n",
        "d/y.cmake": "set(y 1)\ninclude(y.cmake)\n",  # includes itself: CMake would recurse
    }
    env = {"CMAKE_MODULE_PATH": "/t/nowhere;/t/m"}
    it = _interp(files, "include(x RESULT_VARIABLE r)\ninclude(y.cmake)\n", env)
    assert (it.env["from"], it.env["dir"], it.env["r"]) == ("module", "/t/m", "/t/m/x.cmake")
    assert "CMAKE_CURRENT_LIST_DIR" not in it.env and it.env["y"] == "1"
    assert (it.defines["FROM_MODULE"], it.define_files["FROM_MODULE"]) == (("1", 3), "m/x.cmake")
    it = _interp(files, "include(x)\ninclude(none OPTIONAL RESULT_VARIABLE r)\n")
    assert (it.env["from"], it.env["r"]) == ("relative", "NOTFOUND")


# ---------------------------------------------------------------- function() inside if()


def _tree(tmp_path: Path, gpu: str, dirs: dict[str, str], sources: dict[str, list[str]]) -> Path:
    root = tmp_path / "ck"
    (root / GPU).mkdir(parents=True)
    (root / GPU / "CMakeLists.txt").write_text(gpu)
    for d, text in dirs.items():
        (root / GPU / d).mkdir()
        (root / GPU / d / "CMakeLists.txt").write_text(text)
        for s in sources[d]:
            (root / GPU / d / s).write_text("")
    return root


BY_FAMILY = """\
if(GPU_TARGETS MATCHES "gfx11")
    function(add_instance_library NAME)
        foreach(source IN LISTS ARGN)
            if(source MATCHES "_xdl")
                list(REMOVE_ITEM ARGN "${source}")
            endif()
        endforeach()
    endfunction()
else()
    function(add_instance_library NAME)
        foreach(source IN LISTS ARGN)
            if(source MATCHES "_wmma")
                list(REMOVE_ITEM ARGN "${source}")
            endif()
        endforeach()
    endfunction()
endif()
add_subdirectory(g)
"""


def test_function_defined_in_an_if_is_the_one_the_arch_takes(tmp_path):
    """Read off BY_FAMILY by hand: on gfx11 targets the first definition runs (XDL sources
    dropped by its if() on line 4), elsewhere the second (WMMA sources dropped, line 12)."""
    call = "add_instance_library(device_g_instance a_xdl.cpp b_wmma.cpp)\n"
    root = _tree(tmp_path, BY_FAMILY, {"g": call}, {"g": ["a_xdl.cpp", "b_wmma.cpp"]})
    rows, _ = _stage(root)
    gfx11 = [a for a in ARCHS if a.startswith("gfx11")]
    assert _built(rows, "b_wmma.cpp") == gfx11
    assert _built(rows, "a_xdl.cpp") == [a for a in ARCHS if a not in gfx11]
    assert rows[("a_xdl.cpp", "gfx1100")].line == _line(BY_FAMILY, '"_xdl"')
    assert rows[("b_wmma.cpp", "gfx90a")].line == _line(BY_FAMILY, '"_wmma"')


# ---------------------------------------------------------------- one run per call


PER_CALL = """\
function(add_instance_library INSTANCE_NAME)
    foreach(source IN LISTS ARGN)
        set(INST_TARGETS ${SUPPORTED_GPU_TARGETS})
        if(source MATCHES "_xdl")
            list(REMOVE_ITEM INST_TARGETS gfx1100 gfx1101)
        elseif(ARGN MATCHES "_wmma")
            list(REMOVE_ITEM INST_TARGETS gfx908 gfx90a gfx942)
        endif()
        set_source_files_properties(${source} PROPERTIES COMPILE_FLAGS "")
    endforeach()
endfunction()
add_subdirectory(mixed)
add_subdirectory(alone)
"""


def test_library_runs_once_per_call_with_the_whole_argn(tmp_path):
    """CK 2024-10's `elseif(ARGN MATCHES "_wmma")`, read off PER_CALL by hand: in `mixed`, whose
    one call names a WMMA source, the plain source loses gfx908/gfx90a/gfx942 like the WMMA one;
    the same plain source alone in `alone`'s call is built everywhere. Each source keeps the
    target list it had when its properties were set: the XDL source, last in the call, loses
    gfx1100/gfx1101, the WMMA source before it does not."""
    mixed = "add_instance_library(device_mixed_instance a_wmma.cpp b_plain.cpp c_xdl.cpp)\n"
    alone = "add_instance_library(device_alone_instance b_plain.cpp)\n"
    root = _tree(
        tmp_path,
        PER_CALL,
        {"mixed": mixed, "alone": alone},
        {"mixed": ["a_wmma.cpp", "b_plain.cpp", "c_xdl.cpp"], "alone": ["b_plain.cpp"]},
    )
    results = {}
    for p in cm.STAGE.files(root):
        rel = p.relative_to(root).as_posix()
        results[rel] = cm.STAGE.extract(root, rel, p.read_bytes())
    out = cm.STAGE.combine(root, results, BuildContext(trees={}))
    built: dict[str, list[str]] = {}
    why: dict[tuple[str, str], int | None] = {}
    for r in out.rows:
        if type(r).__name__ == "FileBuildRow":
            key = r.file.split("/", 4)[4]
            built.setdefault(key, [])
            if r.built:
                built[key].append(r.arch)
            why[(key, r.arch)] = r.line
    no_gfx9 = [a for a in ARCHS if a not in ("gfx908", "gfx90a", "gfx942")]
    assert built["mixed/a_wmma.cpp"] == no_gfx9
    assert built["mixed/b_plain.cpp"] == no_gfx9
    assert built["alone/b_plain.cpp"] == list(ARCHS)
    assert built["mixed/c_xdl.cpp"] == [a for a in ARCHS if a not in ("gfx1100", "gfx1101")]
    assert why[("mixed/b_plain.cpp", "gfx90a")] == _line(PER_CALL, "elseif")
    assert why[("mixed/c_xdl.cpp", "gfx1100")] == _line(PER_CALL, '"_xdl"')


def test_targets_named_in_an_included_file_are_the_trees(tmp_path):
    """ck_include's README: the top CMakeLists.txt includes cmake/Targets.cmake, which names
    gfx90a, gfx942 and gfx960 (grep: line 2); those are the targets a build is evaluated for.
    cmake/Unused.cmake names gfx1151, but no CMake file includes it."""
    from ckkb.extract import archs_stage

    root = overlay_tree(tmp_path, "ck_include")
    results = {}
    for p in archs_stage.STAGE.files(root):
        rel = p.relative_to(root).as_posix()
        results[rel] = archs_stage.STAGE.extract(root, rel, p.read_bytes())
    rows = archs_stage.STAGE.combine(root, results, BuildContext(trees={})).rows
    got = {r.arch: r for r in rows}
    targets = "cmake/Targets.cmake"
    line = _line(fixture_file("ck_include", targets).read_text(), "gfx960")
    assert sorted(a for a, r in got.items() if r.evaluated) == ["gfx90a", "gfx942", "gfx960"]
    assert (got["gfx960"].file, got["gfx960"].line) == (targets, line)
    assert "gfx1151" not in got


def test_an_included_file_that_does_not_parse_is_damage(tmp_path):
    """A module the top CMakeLists.txt includes that does not parse is an error naming its file
    and the line of the unterminated command (2, by hand); one no CMake includes says nothing."""
    root = overlay_tree(tmp_path, "ck_include")
    (root / "CMakeLists.txt").write_text((root / "CMakeLists.txt").read_text() + "include(Bad)\n")
    (root / "cmake/Bad.cmake").write_text("# broken on purpose\nset(x\n")
    (root / "cmake/AlsoBad.cmake").write_text("set(y\n")
    results = {}
    for p in cm.STAGE.files(root):
        rel = p.relative_to(root).as_posix()
        results[rel] = cm.STAGE.extract(root, rel, p.read_bytes())
    out = cm.STAGE.combine(root, results, BuildContext(trees={}))
    bad = [(d.file, d.line, d.severity) for d in out.diagnostics if "CMake syntax" in d.message]
    assert bad == [("cmake/Bad.cmake", 2, "error")]


def test_a_macro_sets_its_callers_variables_a_function_does_not():
    """CMake's scopes, read off the text by hand: the macro (from an included module) sets
    SKIP in the caller's scope and its parameter is gone after it; the function's set() stays
    in its own scope."""
    files = {
        "m/Skips.cmake": "macro(set_skip P)\n  set(SKIP ${P})\nendmacro()\n"
        "function(set_other P)\n  set(OTHER ${P})\nendfunction()\n"
    }
    text = "include(Skips)\nset_skip(_wmma)\nset_other(_xdl)\n"
    it = _interp(files, text, {"CMAKE_MODULE_PATH": "/t/m"})
    assert it.env["SKIP"] == "_wmma" and "OTHER" not in it.env and "P" not in it.env
