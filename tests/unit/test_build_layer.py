"""Issue 13, the build layer on a tree whose only instance library is not at CK's path: the
library is found from the top CMakeLists.txt, its add_instance_library (defined on the way, in
library/CMakeLists.txt, with a variable set there) and its directory loop are run per arch, a
per-library arch list inside an if()/else() counts only where its branch is taken, and an
aggregate library built from the loop's $<TARGET_OBJECTS:...> list passes its fixed arch list
to the instance libraries it takes.

The tree is ck_mini with the overlay tests/fixtures/ck_vendor (its README has the table of what
is built where). Expected figures are read off the fixture's CMake by hand; lines are found by
grep in the fixture's files (`_line`), apart from the extractor.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckkb import pipeline
from ckkb.cli import main
from ckkb.extract.instance_roots import instance_roots
from ckkb.kb import build as kbbuild
from ckkb.kb.db import open_db
from ckkb.sources import ck_tree
from tests.overlays import fixture_line, overlay_tree

LIB = "library/src/vendor_ops"
GPU = "library/src/tensor_operation_instance/gpu"
LIB_CMAKE = f"{LIB}/CMakeLists.txt"
ON_THE_WAY = "library/CMakeLists.txt"
ARCHS = ["gfx908", "gfx90a", "gfx942", "gfx950", "gfx1100"]
# directory -> (tile, built on each of ARCHS), from the README's table (read off the CMake)
BUILT = {
    "gemm_vendor": ("192x128x64", [1, 1, 1, 0, 0]),
    "gemm_vendor_agg": ("128x192x64", [0, 1, 1, 0, 0]),
    "gemm_vendor_gfx94": ("192x192x64", [0, 0, 1, 0, 0]),
}


def _line(rel: str, pattern: str) -> int:
    """Second method: the line of the first match of `pattern` in the fixture file."""
    return fixture_line("ck_vendor", rel, pattern)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return overlay_tree(tmp_path_factory.mktemp("vendor"), "ck_vendor")


@pytest.fixture(scope="module")
def vendor_db(tmp_path_factory, tree):
    path = tmp_path_factory.mktemp("vendor") / "vendor.db"
    kbbuild.build(path, {"ck": ck_tree(tree)}, stages=pipeline.stages(), jobs=1)
    return path


def run(db, *args):
    return CliRunner().invoke(main, [*args, "--db", str(db)])


def _why(db, d: str, arch: str) -> dict:
    r = run(db, "why", "--tile", BUILT[d][0], "--arch", arch, "--dir", d, "--json")
    assert r.exit_code == 0, r.output
    (m,) = json.loads(r.output)["matches"]
    return m


def test_only_library_is_found_from_the_cmake_chain(tree):
    got = instance_roots(tree)
    # ck_mini's tensor_operation_instance/gpu/ is on disk, but no add_subdirectory reaches it
    assert got.roots == (LIB,) and got.from_chain
    assert got.chain == (("library",),)  # the directory CMake passes through on the way


def test_every_source_gets_a_verdict_per_arch(vendor_db):
    db = open_db(vendor_db, readonly=True)
    got: dict[str, list[int]] = {}
    for file, arch, built in db.execute("SELECT file, arch, built FROM file_builds"):
        d = file.split("/")[3]
        got.setdefault(d, [0] * len(ARCHS))[ARCHS.index(arch)] = built
    assert got == {d: built for d, (_tile, built) in BUILT.items()}
    diags = [m for (m,) in db.execute("SELECT message FROM diagnostics")]
    assert not [m for m in diags if "no build rules" in m or "add_instance_library" in m]


def test_loop_and_library_function_of_the_moved_library(vendor_db):
    m = _why(vendor_db, "gemm_vendor_gfx94", "gfx90a")
    assert m["available"] is False
    (reason,) = m["reasons"]
    assert reason["layer"] == "build"
    assert (reason["file"], reason["line"]) == (LIB_CMAKE, _line(LIB_CMAKE, "ONLY GFX94_KERNELS"))
    assert _why(vendor_db, "gemm_vendor_gfx94", "gfx942")["available"] is True
    # gfx1100 passes the aggregate's list, then add_instance_library drops it, by the list
    # VENDOR_XDL_SKIP that library/CMakeLists.txt sets before it adds the library
    m = _why(vendor_db, "gemm_vendor_agg", "gfx1100")
    (reason,) = m["reasons"]
    assert m["available"] is False and reason["layer"] == "build"
    want = (ON_THE_WAY, _line(ON_THE_WAY, 'MATCHES "_xdl"'))
    assert (reason["file"], reason["line"]) == want


def test_arch_list_inside_an_if_counts_where_its_branch_is_taken(vendor_db):
    for arch in ("gfx908", "gfx90a", "gfx942"):  # gfx942 by the if(), the others by else()
        assert _why(vendor_db, "gemm_vendor", arch)["available"] is True, arch
    line = _line(LIB_CMAKE, "device_gemm_vendor_instance PRIVATE --offload-arch=gfx908")
    for arch in ("gfx950", "gfx1100"):
        m = _why(vendor_db, "gemm_vendor", arch)
        (reason,) = m["reasons"]
        assert m["available"] is False and reason["layer"] == "build"
        assert (reason["file"], reason["line"]) == (LIB_CMAKE, line)
        assert "--offload-arch=gfx908 --offload-arch=gfx90a" in reason["condition"]


def test_aggregate_list_reaches_the_object_libraries_it_takes(vendor_db):
    line = _line(LIB_CMAKE, "^    target_compile_options\\(device_vendor_operations")
    for arch in ("gfx908", "gfx950"):
        m = _why(vendor_db, "gemm_vendor_agg", arch)
        (reason,) = m["reasons"]
        assert m["available"] is False and reason["layer"] == "build"
        assert (reason["file"], reason["line"]) == (LIB_CMAKE, line)
    for arch in ("gfx90a", "gfx942"):
        assert _why(vendor_db, "gemm_vendor_agg", arch)["available"] is True, arch


def test_pool_counts_follow_the_build(vendor_db):
    for d, (_tile, built) in BUILT.items():
        r = run(vendor_db, "pool", "--json", "--dir", d, "--dtype", "f16")
        assert r.exit_code == 0, r.output
        counts = json.loads(r.output)["counts"]
        # one entry per directory, registered on every arch: the pool is the build verdict
        assert [counts[a]["mk_nk"] for a in ARCHS] == built, d


def _stage_builds(root: Path) -> dict[str, dict[str, bool]]:
    """Run the ck.cmake stage on `root`: directory -> arch -> built."""
    from ckkb.extract import cmake as cm
    from ckkb.kb.stages import BuildContext

    results = {}
    for p in cm.STAGE.files(root):
        rel = p.relative_to(root).as_posix()
        results[rel] = cm.STAGE.extract(root, rel, p.read_bytes())
    out = cm.STAGE.combine(root, results, BuildContext(trees={}))
    got: dict[str, dict[str, bool]] = {}
    for r in out.rows:
        if type(r).__name__ == "FileBuildRow":
            got.setdefault(r.file.split("/")[4], {})[r.arch] = r.built
    return got


def test_same_library_at_cks_path_gives_the_same_verdicts(tmp_path):
    """The same library at CK's own path, added by the same library/CMakeLists.txt: the verdicts
    are the table's, so they do not depend on where the library lives."""
    import shutil

    from tests.overlays import FIXTURES

    root = tmp_path / "ck"
    shutil.copytree(FIXTURES / "ck_vendor" / LIB, root / GPU)
    (root / "CMakeLists.txt").write_text((FIXTURES / "ck_vendor/CMakeLists.txt").read_text())
    text = (FIXTURES / "ck_vendor" / ON_THE_WAY).read_text()
    (root / ON_THE_WAY).write_text(text.replace("src/vendor_ops", GPU.split("/", 1)[1]))
    got = _stage_builds(root)
    assert {d: [int(v[a]) for a in ARCHS] for d, v in got.items()} == {
        d: built for d, (_tile, built) in BUILT.items()
    }


def test_directory_sees_the_variables_set_before_it_is_added(tmp_path):
    """A directory's CMakeLists.txt sees the root's variables as they were when add_subdirectory
    ran (CMake's scopes): `${KEEP}` is gfx90a for `a`, gfx942 for `b`, so `a` is built on gfx90a
    only and `b` on gfx942 only (read off the text below by hand)."""
    root = tmp_path / "ck"
    (root / GPU / "a").mkdir(parents=True)
    (root / GPU / "b").mkdir()
    (root / GPU / "CMakeLists.txt").write_text(
        "function(add_instance_library NAME)\nendfunction()\n"
        "set(KEEP gfx90a)\nadd_subdirectory(a)\nset(KEEP gfx942)\nadd_subdirectory(b)\n"
    )
    for d in ("a", "b"):
        (root / GPU / d / "x.cpp").write_text("")
        (root / GPU / d / "CMakeLists.txt").write_text(
            f"add_instance_library(device_{d}_instance x.cpp)\n"
            f"target_compile_options(device_{d}_instance PRIVATE --offload-arch=${{KEEP}})\n"
        )
    got = _stage_builds(root)
    assert [a for a, built in got["a"].items() if built] == ["gfx90a"]
    assert [a for a, built in got["b"].items() if built] == ["gfx942"]


def test_archs_come_from_the_cmake_that_is_read(vendor_db):
    """Targets named only by ck_mini's gpu/CMakeLists.txt (gfx900, gfx906, gfx1030: grep), which
    no add_subdirectory reaches in this tree, are not targets the tree names; library/CMakeLists.txt
    names gfx1101 (VENDOR_XDL_SKIP), a target the tree knows but does not build."""
    r = run(vendor_db, "archs", "--json")
    assert r.exit_code == 0, r.output
    archs = {a["arch"]: a for a in json.loads(r.output)["archs"]}
    assert sorted(archs, key=lambda a: (len(a), a)) == [*ARCHS, "gfx1101"]
    assert all(archs[a]["file"] == "CMakeLists.txt" and archs[a]["evaluated"] for a in ARCHS)
    known = archs["gfx1101"]
    assert (known["file"], known["line"]) == (ON_THE_WAY, _line(ON_THE_WAY, "gfx1101"))
    assert known["evaluated"] is False


def test_file_glob_needs_a_lister():
    """file(GLOB) asks the caller for the files; without a lister nothing is known and the
    variable keeps its value (the top CMakeLists.txt is run that way)."""
    from ckkb.lang.cmake.interpreter import Interpreter
    from ckkb.lang.cmake.syntax import parse_cmake

    stmts, _ = parse_cmake("set(x keep)\nfile(GLOB x LIST_DIRECTORIES true RELATIVE /r a* b)\n")
    it = Interpreter({}, "f")
    it.run(stmts)
    assert it.env["x"] == "keep"
    asked: list[list[str]] = []
    it = Interpreter({}, "f", glob=lambda exprs: asked.append(exprs) or ["/r/a1", "/r/b"])
    it.run(stmts)
    assert asked == [["a*", "b"]] and it.env["x"] == "a1;b"  # RELATIVE /r


def test_arch_list_on_the_way_to_the_library_under_an_if(tmp_path):
    """library/CMakeLists.txt makes the aggregate after adding gpu/ and gives it
    `--offload-arch=gfx90a` only `if(GPU_TARGETS MATCHES "gfx9")`: the source is built on gfx90a
    and on every non-gfx9 target, not on the other gfx9 ones (read off the text by hand)."""
    root = tmp_path / "ck"
    (root / GPU / "a").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("add_subdirectory(library)\n")
    (root / "library/CMakeLists.txt").write_text(
        "add_subdirectory(src/tensor_operation_instance/gpu)\n"
        "add_library(device_operations STATIC $<TARGET_OBJECTS:device_a_instance>)\n"
        'if(GPU_TARGETS MATCHES "gfx9")\n'
        "  target_compile_options(device_operations PRIVATE --offload-arch=gfx90a)\n"
        "endif()\n"
    )
    (root / GPU / "CMakeLists.txt").write_text(
        "function(add_instance_library NAME)\nendfunction()\nadd_subdirectory(a)\n"
    )
    (root / GPU / "a" / "x.cpp").write_text("")
    (root / GPU / "a" / "CMakeLists.txt").write_text(
        "add_instance_library(device_a_instance x.cpp)\n"
    )
    got = _stage_builds(root)["a"]
    assert {a for a, built in got.items() if not built} == {"gfx908", "gfx942", "gfx950"}
    assert got["gfx90a"] and got["gfx1100"]


def test_object_library_linked_into_an_aggregate_of_aggregates(tmp_path):
    """CK-style aggregates by linking: device_gemm_operations links the object library of `a`,
    device_operations links device_gemm_operations and is compiled for gfx942 only, so `a` is
    built on gfx942 only; `b`, linked INTERFACE (passed to users, not taken), is built on every
    target (read off the text by hand)."""
    root = tmp_path / "ck"
    (root / GPU).mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("add_subdirectory(library)\n")
    (root / "library/CMakeLists.txt").write_text(
        "add_subdirectory(src/tensor_operation_instance/gpu)\n"
        "add_library(device_gemm_operations STATIC)\n"
        "target_link_libraries(device_gemm_operations PRIVATE device_a_instance)\n"
        "add_library(device_operations STATIC)\n"
        "target_link_libraries(device_operations PUBLIC device_gemm_operations\n"
        "    INTERFACE device_b_instance)\n"
        "target_compile_options(device_operations PRIVATE --offload-arch=gfx942)\n"
    )
    (root / GPU / "CMakeLists.txt").write_text(
        "function(add_instance_library NAME)\nendfunction()\n"
        "add_subdirectory(a)\nadd_subdirectory(b)\n"
    )
    for d in ("a", "b"):
        (root / GPU / d).mkdir()
        (root / GPU / d / "x.cpp").write_text("")
        (root / GPU / d / "CMakeLists.txt").write_text(
            f"add_instance_library(device_{d}_instance x.cpp)\n"
        )
    got = _stage_builds(root)
    assert [a for a, built in got["a"].items() if built] == ["gfx942"]
    assert all(got["b"].values()) and len(got["b"]) == 8  # ckkb's default archs: no list here
