"""Issue 13, CK half: archs come from the tree, list guards gate per arch, unlisted sources are
not built. Each test builds a copy of the hand-written ck_mini tree changed the way the CK tree
of 2024-10 (or a vendor fork) differs from the default tree.

Figures here are read off the fixture by hand: the edits below are the whole change.
"""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from ckkb import pipeline
from ckkb.cli import main
from ckkb.kb import build as kbbuild
from ckkb.kb.db import open_db
from ckkb.sources import ck_tree
from tests.conftest import FIXTURES

GPU = "library/src/tensor_operation_instance/gpu"
UNI = f"{GPU}/gemm_universal/device_gemm_xdl_universal_bf16_bf16_bf16"
LIST_HPP = f"{UNI}/device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn.hpp"
# the fork's target list: gfx960 is the fork's own target, gfx950 is not named by its CMake
TARGETS = 'set(CK_GPU_TARGETS "gfx908;gfx90a;gfx940;gfx942;gfx960")\n'
FAMILY = (
    "#if defined(__gfx940__) || defined(__gfx942__) || defined(__gfx960__)\n"
    "#define __gfx94__\n#endif\n"
)


def _fork(root, stray: bool = True):
    """ck_mini as a fork: own target list, a family macro, one list entry under #ifdef
    __gfx94__, and (stray) a copy of a directory that no CMake reaches."""
    cm = root / "CMakeLists.txt"
    cm.write_text(cm.read_text() + TARGETS)
    hpp = root / "include/ck/ck.hpp"
    hpp.write_text(hpp.read_text() + FAMILY)
    lines = (root / LIST_HPP).read_text().splitlines(keepends=True)
    # line 38: the last entry of ..._comp_instances, tile 64x64x64 (block 128)
    assert "128, 64, 64, 64," in lines[37]
    lines[37:38] = ["#ifdef __gfx94__\n", lines[37], "#endif\n"]
    (root / LIST_HPP).write_text("".join(lines))
    if stray:
        src = root / UNI
        shutil.copytree(src, root / GPU / "gemm_universal" / "gemm_universal" / src.name)
    return root


@pytest.fixture(scope="module")
def fork_db(tmp_path_factory):
    base = tmp_path_factory.mktemp("fork")
    out = {}
    for name, stray in (("stray", True), ("clean", False)):
        root = _fork(shutil.copytree(FIXTURES / "ck_mini", base / name), stray)
        path = base / f"{name}.db"
        kbbuild.build(path, {"ck": ck_tree(root)}, stages=pipeline.stages(), jobs=1)
        out[name] = path
    return out


def run(db, *args):
    return CliRunner().invoke(main, [*args, "--db", str(db)])


def test_archs_lists_the_trees_targets_with_file_and_line(fork_db):
    r = run(fork_db["stray"], "archs", "--json")
    assert r.exit_code == 0, r.output
    archs = {a["arch"]: a for a in json.loads(r.output)["archs"]}
    line = len((FIXTURES / "ck_mini/CMakeLists.txt").read_text().splitlines()) + 1
    for a in ("gfx908", "gfx90a", "gfx940", "gfx942", "gfx960"):
        assert archs[a]["file"] == "CMakeLists.txt" and archs[a]["line"] == line
        assert archs[a]["evaluated"] is True
    assert archs["gfx960"]["families"] == ["__gfx94__"]
    assert archs["gfx90a"]["families"] == []
    # named by ck.hpp and the instance CMake, but not a target of this tree's build
    assert archs["gfx950"]["evaluated"] is False
    r = run(fork_db["stray"], "archs")
    assert r.exit_code == 0 and "gfx960" in r.output


def test_unknown_arch_gets_a_plain_answer(fork_db):
    r = run(fork_db["stray"], "why", "--tile", "64x64x64", "--arch", "gfx1151")
    assert r.exit_code == 2
    assert "this tree does not know gfx1151; it knows gfx900" in r.output
    assert "gfx960" in r.output
    r = run(fork_db["stray"], "pool", "--json")
    assert r.exit_code == 0
    assert "gfx950" not in json.loads(r.output)["counts"]
    r = run(fork_db["stray"], "why", "--tile", "64x64x64", "--arch", "gfx950")
    assert r.exit_code == 2 and "does not build for it" in r.output


def test_guard_inside_a_list_gates_per_arch_with_evidence(fork_db):
    args = ("why", "--tile", "64x64x64", "--json", "--dir", "gemm_universal")
    r = run(fork_db["clean"], *args, "--arch", "gfx90a")
    assert r.exit_code == 0, r.output
    (m,) = json.loads(r.output)["matches"]
    assert m["available"] is False
    (reason,) = m["reasons"]
    assert reason["layer"] == "preprocessor"
    assert reason["file"] == LIST_HPP and reason["line"] == 38  # the #ifdef, inserted at 38
    assert reason["condition"] == "#if defined(__gfx94__)"
    for arch in ("gfx940", "gfx942", "gfx960"):  # the family, the fork's own target included
        r = run(fork_db["clean"], *args, "--arch", arch)
        (m,) = json.loads(r.output)["matches"]
        assert m["available"] is True, arch


def test_pool_counts_the_guarded_entry_only_where_it_exists(fork_db):
    db = open_db(fork_db["clean"], readonly=True)
    per = dict(
        db.execute(
            "SELECT v.arch, sum(v.available) FROM ck_instance_availability v "
            "JOIN instances i ON i.id = v.instance_id "
            "WHERE i.file = ? AND i.line = 39 GROUP BY v.arch",
            [LIST_HPP],
        ).fetchall()
    )
    # gfx942 has one more: a registration the fixture adds only on gfx942 (device-name compare)
    assert per["gfx90a"] == 0 and per["gfx942"] == 2 and per["gfx960"] == 1


def test_directory_no_cmake_reaches_is_not_counted(fork_db):
    stray = json.loads(run(fork_db["stray"], "pool", "--json").output)["counts"]
    clean = json.loads(run(fork_db["clean"], "pool", "--json").output)["counts"]
    assert stray == clean and clean["gfx942"]["mk_nk"] > 0
    db = open_db(fork_db["stray"], readonly=True)
    rows = db.execute(
        "SELECT DISTINCT f.built, r.action FROM file_builds f JOIN build_rules r "
        "ON r.id = f.rule_id WHERE f.file LIKE ?",
        [f"{GPU}/gemm_universal/gemm_universal/%"],
    ).fetchall()
    assert rows == [(0, "not_listed")]
