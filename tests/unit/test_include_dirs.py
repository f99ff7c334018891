"""Issue 13, the factory headers where the tree's CMake says they are: include directories read
from include_directories()/target_include_directories() (evaluated), and the factory headers
where `#include "ck/library/tensor_operation_instance/gpu/..."` resolves against them.

The fork tree is ck_mini with the overlay tests/fixtures/ck_moved_include (its README says what
is where); expected names and lines are read off the fixture by hand or found by grep (`_grep`),
apart from the extractor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ckkb import pipeline
from ckkb.extract.include_dirs import factory_dirs, include_dirs
from ckkb.extract.instances import _Index
from ckkb.kb import build as kbbuild
from ckkb.kb.db import open_db
from ckkb.sources import ck_tree
from tests.overlays import FIXTURES, fixture_line, overlay_tree

MOVED = "fork/headers/ck/library/tensor_operation_instance/gpu"
CK_PLACE = "library/include/ck/library/tensor_operation_instance/gpu"


def _grep(rel: str, pattern: str) -> int:
    """Second method: the line of the first match of `pattern` in the fixture file."""
    return fixture_line("ck_moved_include", rel, pattern)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return overlay_tree(tmp_path_factory.mktemp("moved"), "ck_moved_include")


@pytest.fixture(scope="module")
def db(tmp_path_factory, tree):
    path = tmp_path_factory.mktemp("moved") / "moved.db"
    kbbuild.build(path, {"ck": ck_tree(tree)}, stages=pipeline.stages(), jobs=1)
    return open_db(path, readonly=True)


def test_include_directories_come_from_the_top_cmake(tree):
    # the build directory's and HIP's are outside the tree; library/include is not named
    got = include_dirs(tree)
    assert got.dirs == ("include", "fork/headers") and got.from_cmake
    assert factory_dirs(tree) == (MOVED,)


def test_tree_without_include_directories_falls_back_to_cks_own():
    got = include_dirs(FIXTURES / "ck_mini")  # its CMakeLists.txt names none
    assert got.dirs == ("include", "library/include") and not got.from_cmake
    assert factory_dirs(FIXTURES / "ck_mini") == (CK_PLACE,)


def test_moved_factory_headers_are_read_and_the_unreached_ones_not(db):
    rows = db.execute("select file, line, function from factories").fetchall()
    assert {r[0] for r in rows} == {f"{MOVED}/gemm_fork.hpp"}
    fn = "add_device_gemm_fork_xdl_f16_f16_f16_mk_nk_mn_instances"
    line = _grep(f"{MOVED}/gemm_fork.hpp", fn)
    assert [(r[1], r[2]) for r in rows] == [(line, fn)]


def test_instance_lists_in_moved_headers_are_read(db):
    rows = db.execute(
        "select i.dir, i.file, i.template, i.mapping, l.name from instances i "
        "join instance_lists l on l.id = i.list_id where i.file like 'fork/%'"
    ).fetchall()
    assert [tuple(r) for r in rows] == [
        (
            "gemm_fork",
            f"{MOVED}/gemm_fork/device_gemm_fork_instance.hpp",
            "DeviceGemm_Xdl_CShuffleV3",
            "ok",
            "device_gemm_fork_xdl_f16_f16_f16_mk_nk_mn_instances",
        )
    ]


def test_include_resolves_against_the_trees_directories():
    index = _Index([f"{MOVED}/a.hpp", f"{CK_PLACE}/a.hpp"], ("include", "fork/headers"))
    inc = "ck/library/tensor_operation_instance/gpu/a.hpp"
    assert index.resolve(inc, "library/src/x/y.cpp") == f"{MOVED}/a.hpp"


def test_include_directories_are_evaluated(tmp_path):
    """An include_directories() in an if() not taken names nothing; $<BUILD_INTERFACE:d> is d,
    $<INSTALL_INTERFACE:...> nothing; a relative directory is relative to the file's (read off
    the text by hand: `hdr` and `library/more`)."""
    root = tmp_path / "ck"
    for d in ("x", "hdr", "library/more", "library/src/lib/a"):
        (root / d).mkdir(parents=True)
    (root / "CMakeLists.txt").write_text(
        "if(USE_X)\n  include_directories(x)\nendif()\n"
        "set(H ${CMAKE_CURRENT_SOURCE_DIR}/hdr)\n"
        "target_include_directories(t PUBLIC $<BUILD_INTERFACE:${H}>\n"
        "    $<INSTALL_INTERFACE:include/ck>)\n"
        "add_subdirectory(library)\n"
    )
    (root / "library/CMakeLists.txt").write_text(
        "include_directories(more)\nadd_subdirectory(src/lib)\n"
    )
    (root / "library/src/lib/CMakeLists.txt").write_text("add_subdirectory(a)\n")
    (root / "library/src/lib/a/CMakeLists.txt").write_text("add_instance_library(l x.cpp)\n")
    got = include_dirs(Path(root))
    assert got.dirs == ("hdr", "library/more") and got.from_cmake
