"""Issue 12, the warm rebuild: the instance roots and include directories a tree's CMake gives
are kept in the build's cache (its `derived` table, `ckkb.extract.kept`) with the size and mtime
of every path read, and reused while none changed, so a rebuild runs no CMake. Each test changes
one input and checks that they are read again, and that they are not when nothing changed (the
reading made to fail). Expected directories are read off the fixture texts written here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ckkb import pipeline
from ckkb.extract import include_dirs as incd
from ckkb.extract import instance_roots as roots_mod
from ckkb.kb import build as kbbuild
from ckkb.kb import stages
from ckkb.kb.build.cache import Cache
from ckkb.kb.stages import build_store, one_build
from ckkb.sources import ck_tree
from tests.overlays import overlay_tree

GPU = "library/src/tensor_operation_instance/gpu"


class Store:
    """A DerivedStore in memory."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str], bytes] = {}

    def recall(self, key: str, root: str) -> bytes | None:
        return self.kept.get((key, root))

    def remember(self, key: str, root: str, blob: bytes) -> None:
        self.kept[(key, root)] = blob


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ck"
    for d in ("hdr", "more", "cmake", f"{GPU}/a"):
        (root / d).mkdir(parents=True)
    (root / "CMakeLists.txt").write_text(
        "list(APPEND CMAKE_MODULE_PATH ${PROJECT_SOURCE_DIR}/cmake)\n"
        "include(Dirs)\n"
        "include_directories(${HDR})\n"
        f"add_subdirectory({GPU})\n"
    )
    (root / "cmake/Dirs.cmake").write_text("set(HDR hdr)\n")
    (root / GPU / "CMakeLists.txt").write_text("add_subdirectory(a)\n")
    (root / GPU / "a/CMakeLists.txt").write_text("add_instance_library(l x.cpp)\n")
    return root


def _dirs(root: Path, store: Store) -> tuple[str, ...]:
    with one_build(store):  # a build of its own: per_build results do not carry over
        return incd.include_dirs(root).dirs


def _touch(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()  # a later mtime, whatever the file system's clock resolution
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def _no_cmake(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> None:
        raise AssertionError("the CMake was read again")

    monkeypatch.setattr(incd, "_read", fail)
    monkeypatch.setattr(roots_mod, "_walk", fail)


def _roots(root: Path, store: Store) -> tuple[str, ...]:
    with one_build(store):
        return roots_mod.instance_roots(root).roots


def test_kept_directories_are_reused_while_nothing_changed(tree, monkeypatch):
    store = Store()
    assert _dirs(tree, store) == ("hdr",)
    assert {k.split("/")[0] for k, _ in store.kept} == {"include_dirs", "instance_roots"}
    _no_cmake(monkeypatch)
    assert _dirs(tree, store) == ("hdr",)


def test_a_changed_cmake_file_is_read_again(tree):
    store = Store()
    assert _dirs(tree, store) == ("hdr",)
    _touch(
        tree / "CMakeLists.txt",
        (tree / "CMakeLists.txt").read_text() + "include_directories(more)\n",
    )
    assert _dirs(tree, store) == ("hdr", "more")


def test_a_changed_included_module_is_read_again(tree):
    store = Store()
    assert _dirs(tree, store) == ("hdr",)
    _touch(tree / "cmake/Dirs.cmake", "set(HDR more)\n")
    assert _dirs(tree, store) == ("more",)


def test_a_new_directory_with_include_directories_is_read(tree):
    store = Store()
    assert _dirs(tree, store) == ("hdr",)
    (tree / GPU / "b").mkdir()
    (tree / GPU / "b/CMakeLists.txt").write_text(
        "include_directories(${PROJECT_SOURCE_DIR}/more)\n"
    )
    assert _dirs(tree, store) == ("hdr", "more")


def test_a_removed_directory_is_left_out_without_reading_the_cmake(tree, monkeypatch):
    store = Store()
    assert _dirs(tree, store) == ("hdr",)
    (tree / "hdr").rmdir()
    _no_cmake(monkeypatch)
    assert _dirs(tree, store) == ()  # no directory the CMake names exists, and none of CK's


def test_a_new_instance_root_is_found_and_its_directories_read(tree):
    """A root reached through a directory the include directories' files do not name: the
    instance roots see the changed CMakeLists.txt, the include directories the new file list."""
    store = Store()
    assert _roots(tree, store) == (GPU,) and _dirs(tree, store) == ("hdr",)
    (tree / "fork/lib/x").mkdir(parents=True)
    (tree / "fork/CMakeLists.txt").write_text("add_subdirectory(lib)\n")
    (tree / "fork/lib/CMakeLists.txt").write_text("add_subdirectory(x)\n")
    (tree / "fork/lib/x/CMakeLists.txt").write_text(
        "include_directories(${PROJECT_SOURCE_DIR}/more)\nadd_instance_library(f y.cpp)\n"
    )
    _touch(
        tree / "CMakeLists.txt", (tree / "CMakeLists.txt").read_text() + "add_subdirectory(fork)\n"
    )
    assert _roots(tree, store) == (GPU, "fork/lib")
    assert _dirs(tree, store) == ("hdr", "more")


def test_a_cmakelists_added_to_a_looped_directory_is_seen(tree):
    """gpu/ adds its directories in a loop over those with a CMakeLists.txt: one added to an
    existing directory changes no mtime but its own, and is stamped as missing before."""
    (tree / GPU / "CMakeLists.txt").write_text(
        "file(GLOB dirs *)\nforeach(d ${dirs})\n  add_subdirectory(${d})\nendforeach()\n"
    )
    (tree / "lib2/sub").mkdir(parents=True)
    store = Store()
    assert _roots(tree, store) == (GPU,)
    (tree / "lib2/CMakeLists.txt").write_text(
        "file(GLOB dirs *)\nforeach(d ${dirs})\nadd_subdirectory(${d})\nendforeach()\n"
    )
    _touch(
        tree / "CMakeLists.txt", (tree / "CMakeLists.txt").read_text() + "add_subdirectory(lib2)\n"
    )
    assert _roots(tree, store) == (GPU,)  # lib2's directory has no CMakeLists.txt yet
    (tree / "lib2/sub/CMakeLists.txt").write_text("add_instance_library(z z.cpp)\n")
    assert _roots(tree, store) == (GPU, "lib2")


def test_the_cache_keeps_derived_facts(tmp_path):
    cache = Cache(tmp_path / "x.cache")
    assert cache.recall("k", "/r") is None
    cache.remember("k", "/r", b"1")
    cache.remember("k", "/r", b"2")
    assert cache.recall("k", "/r") == b"2" and cache.recall("k", "/other") is None
    cache.close()
    assert Cache(tmp_path / "x.cache").recall("k", "/r") == b"2"


def test_a_forked_worker_does_not_use_the_builds_store(monkeypatch):
    store = Store()
    with one_build(store):
        assert build_store() is store
        monkeypatch.setattr(stages.os, "getpid", lambda: -1)  # another process
        assert build_store() is None
    assert build_store() is None


def test_a_rebuild_reads_the_kept_directories(tmp_path, monkeypatch):
    root = overlay_tree(tmp_path, "ck_moved_include")
    db = tmp_path / "moved.db"
    kbbuild.build(db, {"ck": ck_tree(root)}, stages=pipeline.stages(), jobs=1)
    assert (
        Cache(db.with_name(db.name + ".cache")).recall("include_dirs/1/ckkb-0.1.0", str(root))
        is not None
    )
    _no_cmake(monkeypatch)
    again = kbbuild.build(db, {"ck": ck_tree(root)}, stages=pipeline.stages(), jobs=1)
    assert again.up_to_date


@pytest.mark.parametrize("blob", [b"", b"[1, 2]", b'[[["x", "a", 1]], null, 1]', b"\xff"])
def test_a_record_of_another_form_is_read_again(tree, blob):
    store = Store()
    assert _dirs(tree, store) == ("hdr",)
    for k in store.kept:
        store.kept[k] = blob
    assert _dirs(tree, store) == ("hdr",) and _roots(tree, store) == (GPU,)
