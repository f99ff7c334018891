"""Issue 13, CK half: archs come from the tree, list guards gate per arch, unlisted sources are
not built, a second instance library is found, and a library's own target list gates per arch.
The tree is ck_mini with the overlay tests/fixtures/ck_fork (tests/overlays.fork_tree; its README
lists the changes: the way a vendor fork differs from CK).

Figures here are read off the fixture by hand (the fork's changes are the whole difference from
ck_mini); lines are found by grep in the fixture's files.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from ckkb import pipeline
from ckkb.cli import main
from ckkb.extract.instance_roots import instance_roots
from ckkb.kb import build as kbbuild
from ckkb.kb.db import open_db
from ckkb.sources import ck_tree
from tests.conftest import FIXTURES
from tests.overlays import fixture_file, fork_tree

GPU = "library/src/tensor_operation_instance/gpu"
UNI = f"{GPU}/gemm_universal/device_gemm_xdl_universal_bf16_bf16_bf16"
LIST_HPP = f"{UNI}/device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn.hpp"
FORK_LIB = "library/src/fork_instance"
FORK_CMAKE = f"{FORK_LIB}/gemm_fork/CMakeLists.txt"


def _line(rel: str, pattern: str) -> int:
    """Second method: the 1-based line of the first match of `pattern` in the fixture file."""
    lines = fixture_file("ck_fork", rel).read_text().splitlines()
    return next(i + 1 for i, ln in enumerate(lines) if re.search(pattern, ln))


@pytest.fixture(scope="module")
def fork(tmp_path_factory):
    return fork_tree(tmp_path_factory.mktemp("fork"))


@pytest.fixture(scope="module")
def fork_db(tmp_path_factory, fork):
    path = tmp_path_factory.mktemp("fork") / "fork.db"
    kbbuild.build(path, {"ck": ck_tree(fork)}, stages=pipeline.stages(), jobs=1)
    return path


def _in(matches: list, file: str) -> list:
    """The matches whose entry is in `file` (the stray copy repeats the list's entries)."""
    return [m for m in matches if m["instance"]["file"] == file]


def run(db, *args):
    return CliRunner().invoke(main, [*args, "--db", str(db)])


def test_archs_lists_the_trees_targets_with_file_and_line(fork_db):
    r = run(fork_db, "archs", "--json")
    assert r.exit_code == 0, r.output
    archs = {a["arch"]: a for a in json.loads(r.output)["archs"]}
    line = _line("CMakeLists.txt", "set\\(CK_GPU_TARGETS")
    for a in ("gfx908", "gfx90a", "gfx940", "gfx942", "gfx960"):
        assert archs[a]["file"] == "CMakeLists.txt" and archs[a]["line"] == line
        assert archs[a]["evaluated"] is True
    assert archs["gfx960"]["families"] == ["__gfx94__"]
    assert archs["gfx90a"]["families"] == []
    # named by ck.hpp and the instance CMake, but not a target of this tree's build
    assert archs["gfx950"]["evaluated"] is False
    r = run(fork_db, "archs")
    assert r.exit_code == 0 and "gfx960" in r.output


def test_unknown_arch_gets_a_plain_answer(fork_db):
    r = run(fork_db, "why", "--tile", "64x64x64", "--arch", "gfx1151")
    assert r.exit_code == 2
    assert "this tree does not know gfx1151; it knows gfx900" in r.output
    assert "gfx960" in r.output
    r = run(fork_db, "pool", "--json")
    assert r.exit_code == 0
    assert "gfx950" not in json.loads(r.output)["counts"]
    r = run(fork_db, "why", "--tile", "64x64x64", "--arch", "gfx950")
    assert r.exit_code == 2 and "does not build for it" in r.output


def test_guard_inside_a_list_gates_per_arch_with_evidence(fork_db):
    args = ("why", "--tile", "64x64x64", "--json", "--dir", "gemm_universal")
    r = run(fork_db, *args, "--arch", "gfx90a")
    assert r.exit_code == 0, r.output
    (m,) = _in(json.loads(r.output)["matches"], LIST_HPP)
    assert m["available"] is False
    (reason,) = m["reasons"]
    assert reason["layer"] == "preprocessor"
    assert reason["file"] == LIST_HPP and reason["line"] == _line(LIST_HPP, "^#ifdef __gfx94__")
    assert reason["condition"] == "#if defined(__gfx94__)"
    for arch in ("gfx940", "gfx942", "gfx960"):  # the family, the fork's own target included
        r = run(fork_db, *args, "--arch", arch)
        (m,) = _in(json.loads(r.output)["matches"], LIST_HPP)
        assert m["available"] is True, arch


def test_pool_counts_the_guarded_entry_only_where_it_exists(fork_db):
    db = open_db(fork_db, readonly=True)
    per = dict(
        db.execute(
            "SELECT v.arch, sum(v.available) FROM ck_instance_availability v "
            "JOIN instances i ON i.id = v.instance_id "
            "WHERE i.file = ? AND i.line = ? GROUP BY v.arch",
            [LIST_HPP, _line(LIST_HPP, "^#ifdef __gfx94__") + 1],
        ).fetchall()
    )
    # gfx942 has one more: a registration the fixture adds only on gfx942 (device-name compare)
    assert per["gfx90a"] == 0 and per["gfx942"] == 2 and per["gfx960"] == 1


def test_directory_no_cmake_reaches_is_not_counted(fork_db):
    counts = json.loads(run(fork_db, "pool", "--json").output)["counts"]
    # read off by hand, and equal to a build of this tree without the stray copy (run once)
    assert {a: c["mk_nk"] for a, c in counts.items()} == {
        "gfx908": 0,
        "gfx90a": 16,
        "gfx940": 15,
        "gfx942": 18,
        "gfx960": 15,
    }
    db = open_db(fork_db, readonly=True)
    rows = db.execute(
        "SELECT DISTINCT f.built, r.action FROM file_builds f JOIN build_rules r "
        "ON r.id = f.rule_id WHERE f.file LIKE ?",
        [f"{GPU}/gemm_universal/gemm_universal/%"],
    ).fetchall()
    assert rows == [(0, "not_listed")]


def test_second_instance_library_is_found_from_the_cmake_chain(fork):
    got = instance_roots(fork)
    assert got.roots == (GPU, FORK_LIB) and got.from_chain
    # ck_mini's top CMakeLists.txt adds no subdirectory: CK's own path, by convention
    mini = instance_roots(FIXTURES / "ck_mini")
    assert mini.roots == (GPU,) and not mini.from_chain


def test_second_library_instances_and_registrations(fork_db):
    r = run(fork_db, "instances", "--dir", "gemm_fork", "--json")
    assert r.exit_code == 0, r.output
    insts = json.loads(r.output)["instances"]
    # second method: the two `DeviceGemm_Xdl_CShuffleV3<` entry lines of the fork's source
    src = f"{FORK_LIB}/gemm_fork/device_gemm_fork_xdl_f16_f16_f16_mk_nk_mn_instance.cpp"
    lines = fixture_file("ck_fork", src).read_text().splitlines()
    want = [i + 1 for i, ln in enumerate(lines) if ln.lstrip().startswith("DeviceGemm_Xdl")]
    assert sorted(i["line"] for i in insts) == want and {i["file"] for i in insts} == {src}
    assert all(i["registrations"] for i in insts)


def test_library_target_list_gates_per_arch_with_evidence(fork_db):
    args = ("why", "--tile", "160x128x64", "--json", "--dir", "gemm_fork")
    line = _line(FORK_CMAKE, "^target_compile_options")
    for arch in ("gfx908", "gfx90a", "gfx940"):  # built by the tree, not by this library
        r = run(fork_db, *args, "--arch", arch)
        assert r.exit_code == 0, r.output
        (m,) = json.loads(r.output)["matches"]
        assert m["available"] is False, arch
        (reason,) = m["reasons"]
        assert reason["layer"] == "build"
        assert (reason["file"], reason["line"]) == (FORK_CMAKE, line)
        assert "--offload-arch=gfx942 --offload-arch=gfx960" in reason["condition"]
    for arch in ("gfx942", "gfx960"):
        (m,) = json.loads(run(fork_db, *args, "--arch", arch).output)["matches"]
        assert m["available"] is True, arch
    r = run(fork_db, "pool", "--json", "--dir", "gemm_fork", "--dtype", "f16")
    counts = json.loads(r.output)["counts"]
    assert {a: c["mk_nk"] for a, c in counts.items()} == {
        "gfx908": 0,
        "gfx90a": 0,
        "gfx940": 0,
        "gfx942": 2,
        "gfx960": 2,
    }


def _guarded_instance(db) -> int:
    line = _line(LIST_HPP, "^#ifdef __gfx94__") + 1
    return db.execute(
        "SELECT id FROM instances WHERE file = ? AND line = ?", [LIST_HPP, line]
    ).fetchone()[0]


def test_explain_and_locate_honour_guards_inside_lists(fork_db):
    """The explain page's arch table and `ckkb locate` say what why and pool say: the entry under
    `#ifdef __gfx94__` is not there on gfx90a (preprocessor layer), whatever its registrations
    say."""
    import sqlite3

    import sqlite_utils

    from ckkb.queries.explain import explain
    from ckkb.queries.names import locate

    conn = sqlite3.connect(fork_db)
    iid = _guarded_instance(conn)
    ifdef = _line(LIST_HPP, "^#ifdef __gfx94__")
    res = explain(conn, iid)
    table = {r["arch"]: r for r in res["arch_table"]}
    assert table["gfx90a"]["available"] is False
    assert (table["gfx90a"]["layer"], table["gfx90a"]["line"]) == ("preprocessor", ifdef)
    assert table["gfx942"]["available"] and table["gfx960"]["available"]
    # the tree's arch order (gfx940 and the fork's gfx960 among the others), not a fixed list
    assert [r["arch"] for r in res["arch_table"]] == [
        "gfx908",
        "gfx90a",
        "gfx940",
        "gfx942",
        "gfx960",
    ]
    found = locate(sqlite_utils.Database(fork_db), res["printed_names"][0])
    (entry,) = [e for e in found["entries"] if e["file"] == LIST_HPP]
    for reg in entry["registrations"]:
        assert reg["availability"]["gfx90a"]["available"] is False
        assert reg["availability"]["gfx90a"]["layer"] == "preprocessor"
    assert any(reg["availability"]["gfx942"]["available"] for reg in entry["registrations"])


def test_races_registered_honours_guards_inside_lists(fork_db, tmp_path):
    """A race's registered pool leaves out the entry an #ifdef __gfx94__ drops: gfx90a has one
    instance fewer than gfx942 and the fork's gfx960 (by hand: the guarded comp entry, added by
    the one comp registering call whose factory is a bf16 Row/Col DeviceGemmV2)."""
    import shutil
    import sqlite3

    db = tmp_path / "kb.db"
    shutil.copy(fork_db, db)
    con = sqlite3.connect(db)
    con.executemany(
        "INSERT INTO races (id, op, dtype, layout, arch) VALUES (?, 'gemm_universal', 'bf16', "
        "'mk_nk', ?)",
        [(1, "gfx90a"), (2, "gfx942"), (3, "gfx960")],
    )
    got = dict(con.execute("SELECT race_id, registered FROM races_registered").fetchall())
    con.close()
    assert got[2] == got[3] == got[1] + 1


def test_pool_query_has_a_column_per_arch_of_the_tree(fork_db):
    """The pool canned query keys its per-arch counts by the tree's archs: the fork's gfx960 is
    there, gfx950 (named by its CMake but not built) is not."""
    from ckkb.queries import ck as q

    rows = q.pool(open_db(fork_db), "gemm_fork", "gfx960")
    assert len(rows) == 2  # the fork library's two entries
    for r in rows:
        assert list(json.loads(r["per_arch"])) == ["gfx908", "gfx90a", "gfx940", "gfx942", "gfx960"]
        assert (r["gfx90a"], r["gfx942"], r["gfx960"]) == (0, 1, 1)


def test_instance_roots_follow_changes_to_the_cmake(tmp_path):
    """The answer is kept between calls (a build asks several times) but not past a change: a
    library the top CMakeLists.txt stops adding is no longer an instance library."""

    root = fork_tree(tmp_path)
    assert instance_roots(root).roots == (GPU, FORK_LIB)
    lib = root / "library/CMakeLists.txt"
    lib.write_text(lib.read_text().replace("add_subdirectory(src/fork_instance)\n", ""))
    assert instance_roots(root).roots == (GPU,)
