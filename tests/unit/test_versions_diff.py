"""`ckkb diff` between two CK trees, and the version_diff canned query, on ck_mini and its next
version ck_mini_diff (tests/fixtures/ck_mini_diff/README.md lists what changed: a list moved to
another file, one tuple changed, one entry written twice, one gate changed).

The expected figures are the fixture's hand-written changes; the file:line of each entry is found
by searching the fixture's text (`_line`), not by the extractor.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import types

import pytest
from click.testing import CliRunner

from ckkb import pipeline, sources
from ckkb.cli import main
from ckkb.kb import build as kbbuild
from ckkb.kb.trees import scoped_sql
from ckkb.queries import sql
from ckkb.versions import diff as diff_mod
from ckkb.versions.ck_instances import dtype_word, instance_rows
from ckkb.versions.pairing import pair
from tests.conftest import FIXTURES
from tests.overlays import overlay_tree
from tests.versions_check import canned_rows, expected_by_python

UNI = (
    "library/src/tensor_operation_instance/gpu/gemm_universal/"
    "device_gemm_xdl_universal_bf16_bf16_bf16"
)
P = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn"
HPP = f"{UNI}/{P}.hpp"
MEM_HPP = f"{UNI}/{P}_mem.hpp"
ENTRY_V5 = "GemmSpec, 256, 128, 128, {k}, 8, 8, 32, 32, 2, 2"
V5 = "BlockGemmPipelineVersion::v5>"
ENTRY_INTER = "GemmSpec, 128, 64, 64, 64, 8, 8, 32, 32, 1, 1"
MEM_ENTRIES = ("GemmSpec, 128, 32, 16, 128,", "GemmSpec, 256, 256, 16, 64,")
PART2 = ("256, 256, 224, 64", "256, 224, 256, 64", "256, 256, 192, 64")  # active part2 entries


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """{"old": ck_mini, "new": ck_mini with ck_mini_diff copied over it}."""
    new = overlay_tree(tmp_path_factory.mktemp("ck_diff"), "ck_mini_diff")
    return {"old": FIXTURES / "ck_mini", "new": new}


@pytest.fixture(scope="module")
def kb(tmp_path_factory, trees):
    """One knowledge base: CK trees old and new, aiter trees a1 (aiter_mini) and a2."""
    path = tmp_path_factory.mktemp("diff") / "kb.db"
    named = [
        sources.named_tree(sources.aiter_tree(str(FIXTURES / "aiter_mini")), "a1"),
        sources.named_tree(sources.ck_tree(str(trees["old"])), "old"),
        sources.named_tree(sources.ck_tree(str(trees["new"])), "new"),
        sources.named_tree(sources.aiter_tree(str(FIXTURES / "aiter_2026_mini")), "a2"),
    ]
    kbbuild.build(path, named, stages=pipeline.stages(), jobs=1)
    return path


def _line(root, rel: str, needle: str | tuple[str, ...], nth: int = 0) -> int:
    """1-based line of the nth line of root/rel containing needle (each of them, for a tuple):
    the grep of the test."""
    needles = (needle,) if isinstance(needle, str) else needle
    lines = (root / rel).read_text().splitlines()
    hits = [n for n, text in enumerate(lines, 1) if all(x in text for x in needles)]
    return hits[nth]


def run(kb, *args):
    return CliRunner().invoke(main, ["diff", *args, "--db", str(kb)])


def answer(kb, *args) -> dict:
    r = run(kb, *args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_moved_list_is_not_a_change(kb, trees):
    res = answer(kb, "old", "new")
    inst = res["instances"]
    items = inst["added"] + inst["removed"] + inst["changed"]
    assert not [i for i in items if "mem_instances" in str(i["list"])]
    # the mem entries are in another file in the new tree, and were paired all the same
    rows = instance_rows(sqlite3.connect(kb), "old", "new", "gfx942", "", "")
    for entry in MEM_ENTRIES:
        old_at = f"{HPP}:{_line(trees['old'], HPP, entry)}"
        new_at = f"{MEM_HPP}:{_line(trees['new'], MEM_HPP, entry)}"
        assert old_at != new_at
        assert not [r for r in rows if f"{r['from_file']}:{r['from_line']}" == old_at]


def test_changed_tuple_is_removed_and_added(kb, trees):
    inst = answer(kb, "old", "new")["instances"]
    assert [(i["tile"], i["from"], i["to"]) for i in inst["removed"]] == [
        ("128x128x64", f"{HPP}:{_line(trees['old'], HPP, (ENTRY_V5.format(k=64), V5))}", None)
    ]
    v5 = [i for i in inst["added"] if i["tile"] == "128x128x32"]
    assert [(i["from"], i["to"]) for i in v5] == [
        (None, f"{HPP}:{_line(trees['new'], HPP, (ENTRY_V5.format(k=32), V5))}")
    ]
    item = v5[0]
    assert item["template"] == "DeviceGemm_Xdl_CShuffleV3"
    assert (item["dir"], item["dtype"], item["layout"]) == ("gemm_universal", "bf16", "mk_nk")
    assert item["fields"]["KPerBlock"] == 32 and item["fields"]["BlkGemmPipelineVer"].endswith("v5")
    assert item["status"] == {"from": None, "to": "active"}
    # registered with GemmDefault, KPadding, MNKPadding: available where the comp list is
    assert item["available"]["gfx942"] is True


def test_entry_written_twice_counts_twice(kb, trees):
    """A multiset: the new tree has the Interwave entry twice, the old once; the first occurrence
    (in file order) pairs with the old one, the second is added."""
    added = answer(kb, "old", "new")["instances"]["added"]
    inter = [i for i in added if i["tile"] == "64x64x64"]
    assert [i["to"] for i in inter] == [f"{HPP}:{_line(trees['new'], HPP, ENTRY_INTER, 1)}"]
    assert len(added) == 2


def test_gate_change(kb, trees):
    res = answer(kb, "old", "new")
    cpp = f"{UNI}/{P}_comp_default_instance.cpp"
    gate_line = _line(trees["new"], cpp, "get_device_name() !=")
    assert [(g["arch"], g["effect"], g["to"]) for g in res["gates"]["added"]] == [
        ("gfx942", "exclude", f"{cpp}:{gate_line}")
    ]
    assert [(g["arch"], g["effect"], g["from"]) for g in res["gates"]["removed"]] == [
        ("gfx950", "exclude", f"{cpp}:{gate_line}")
    ]
    # the registering call's condition changed with it
    assert [r["condition"] for r in res["registrations"]["removed"]] == [
        'ck::get_device_name() != "gfx950"'
    ]
    changed = res["instances"]["changed"]
    assert sorted(i["tile"] for i in changed) == sorted("x".join(t.split(", ")[1:]) for t in PART2)
    for i in changed:
        assert i["from"] == f"{HPP}:{_line(trees['old'], HPP, PART2[_tile_index(i)])}"
        assert i["to"] == f"{HPP}:{_line(trees['new'], HPP, PART2[_tile_index(i)])}"
        (flip,) = i["archs"]
        assert flip["arch"] == "gfx950"
        assert flip["from"]["available"] is False and flip["to"]["available"] is True
        assert flip["to"]["reasons"] == [] and flip["from"]["added_by"] == []
        # the new gate lets comp_default's call add part2 on gfx950
        assert {(g["function"], g["file"]) for g in flip["to"]["added_by"]} == {
            (f"add_{P}_comp_default_instances", cpp)
        }
        assert {(r["layer"], r["file"], r["line"]) for r in flip["from"]["reasons"]} >= {
            ("registration", cpp, _line(trees["old"], cpp, "get_device_name() !="))
        }


def _tile_index(item: dict) -> int:
    return [("x".join(t.split(", ")[1:])) for t in PART2].index(item["tile"])


def test_filters_and_archs(kb):
    res = answer(kb, "old", "new", "--arch", "gfx942", "--dir", "gemm_universal")
    assert res["archs"] == [{"arch": "gfx942", "from": True, "to": True, "compared": True}]
    assert res["instances"]["changed"] == []  # the part2 flip is on gfx950
    assert len(res["instances"]["added"]) == 2 and len(res["instances"]["removed"]) == 1
    assert set(res["instances"]["added"][0]["available"]) == {"gfx942"}
    # a gate naming another arch is left out; one naming gfx942 stays
    assert [g["arch"] for g in res["gates"]["added"]] == ["gfx942"]
    assert res["gates"]["removed"] == []
    other = answer(kb, "old", "new", "--dir", "gemm_mx")
    assert other["instances"] == {"added": [], "removed": [], "changed": []}
    kn = answer(kb, "old", "new", "--layout", "mk_kn", "--dtype", "bf16")
    assert kn["instances"] == {"added": [], "removed": [], "changed": []}
    assert kn["registrations"] == {"added": [], "removed": []}
    nk = answer(kb, "old", "new", "--layout", "mk_nk", "--dtype", "bf16")
    assert len(nk["instances"]["changed"]) == 3


def test_same_tree_is_empty(kb):
    res = answer(kb, "new", "new")
    assert res["instances"] == {"added": [], "removed": [], "changed": []}
    assert res["gates"] == {"added": [], "removed": []}
    assert res["profiler_ops"] == {"added": [], "removed": [], "changed": []}


def test_text_output(kb):
    r = run(kb, "old", "new", "--arch", "gfx950")
    assert r.exit_code == 0, r.output
    assert "old -> new; availability compared on: gfx950" in r.output
    assert "~ DeviceGemm_Xdl_CShuffleV3 gemm_universal bf16 mk_nk 256x224x64" in r.output
    assert "gfx950: no -> yes" in r.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["old", "nope"], "no tree named 'nope'"),
        (["old", "a1"], "cannot compare old (ck tree) with a1 (aiter tree)"),
        (["old", "new", "--arch", "gfx999"], "unknown arch 'gfx999'"),
        (["old", "new", "--dtype", "bf17"], "unknown --dtype 'bf17'"),
        (["old", "new", "--layout", "mn_kk"], "unknown --layout 'mn_kk'"),
        (["a1", "a2", "--dir", "gemm_universal"], "filter CK trees only"),
    ],
)
def test_bad_input(kb, args, message):
    r = run(kb, *args)
    assert r.exit_code == 2
    assert message in r.output
    assert "Traceback" not in r.output
    assert r.output.startswith("ckkb: error: ")


def test_aiter_trees_go_to_aiter_diff(kb, monkeypatch):
    """Two aiter trees: aiter_diff(from_conn, to_conn) answers, each connection reading its tree."""
    seen = []

    def aiter_diff(old, new):
        seen.append(
            [
                (c.execute("select name from sources where kind = 'aiter'").fetchall())
                for c in (old, new)
            ]
        )
        return {
            "from": {"name": "a1"},
            "to": {"name": "a2"},
            "kernels": {"added": [], "removed": [], "renumbered": []},
        }

    fake = types.ModuleType("ckkb.versions.aiter_diff")
    fake.aiter_diff = aiter_diff  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ckkb.versions.aiter_diff", fake)
    res = answer(kb, "a1", "a2")
    assert res["from"] == "a1" and res["to"] == "a2" and res["kind"] == "aiter"
    assert res["kernels"]["renumbered"] == []
    assert res["trees"] == {"from": {"name": "a1"}, "to": {"name": "a2"}}
    r = run(kb, "a1", "a2")
    assert r.exit_code == 0 and "a1 -> a2 (aiter trees)" in r.output
    assert seen == [[[("a1",)], [("a2",)]]] * 2


@pytest.mark.parametrize(
    "arch, dir, dtype, layout",
    [
        ("gfx950", "", "", ""),
        ("gfx942", "gemm_universal", "bhalf_t", ""),
        ("gfx1100", "", "bhalf_t", ""),
        ("gfx950", "gemm_mx", "", ""),
        ("gfx950", "", "", "mk_nk"),
        ("gfx950", "", "", "mk_kn"),
    ],
)
def test_canned_query_equals_cli(kb, arch, dir, dtype, layout):
    """The version_diff canned query (as Datasette runs it) answers what `ckkb diff` does."""
    conn = sqlite3.connect(kb)
    params = {"from": "old", "to": "new", "arch": arch, "dir": dir, "dtype": dtype}
    params["layout"] = layout
    canned = conn.execute(sql("version_diff"), params)
    cols = [d[0] for d in canned.description]
    page = [dict(zip(cols, r, strict=True)) for r in canned]

    def at(r: dict, side: str) -> str | None:
        return f"{r[side + '_file']}:{r[side + '_line']}" if r[side + "_file"] else None

    from_page = sorted(
        (
            r["change"],
            r["template"],
            at(r, "from"),
            at(r, "to"),
        )
        for r in page
    )
    args = ["old", "new", "--arch", arch] + (["--dir", dir] if dir else [])
    args += ["--dtype", dtype] if dtype else []
    args += ["--layout", layout] if layout else []
    res = answer(kb, *args)
    from_cli = sorted(
        (change, i["template"], i["from"], i["to"])
        for change in ("added", "removed", "changed")
        for i in res["instances"][change]
    )
    assert from_page == from_cli
    assert all(r["arch"] == arch for r in page)
    if arch == "gfx950" and not dir and layout != "mk_kn":
        assert len([r for r in page if r["change"] == "changed"]) == 3
    if layout:  # the fixtures' changes are all in mk_nk lists (ck_mini_diff/README.md)
        assert all(r["layout"] == layout for r in page)
        assert bool(page) == (layout == "mk_nk")


def test_canned_query_is_not_scoped_to_one_tree():
    """Datasette scopes canned queries to one tree (scoped_sql); version_diff reads two trees
    through main.*, which that rewriting leaves alone."""
    text = sql("version_diff")
    assert scoped_sql(text) == text


def test_pair_is_a_multiset():
    def row(k, line):
        return {"k": k, "file": "f", "line": line}

    added, removed, same = pair(
        [row("a", 1), row("a", 2), row("b", 3)],
        [row("a", 9), row("c", 1), row("c", 2)],
        lambda r: r["k"],
    )
    assert [(r["k"], r["line"]) for r in added] == [("c", 1), ("c", 2)]
    assert [(r["k"], r["line"]) for r in removed] == [("a", 2), ("b", 3)]
    assert [(a["line"], b["line"]) for a, b in same] == [(1, 9)]


def test_dtype_word():
    assert dtype_word("bhalf_t", "ck::bhalf_t", "bhalf_t") == "bf16"
    assert dtype_word("f8_t", "f8_t", "bhalf_t") == "f8_f8_bf16"
    assert dtype_word(None, None, None) is None


def test_diff_module_api(kb):
    res = diff_mod.diff(kb, "old", "new", archs=["gfx950"])
    assert len(res["instances"]["changed"]) == 3


def test_datasette_serves_version_diff(kb):
    """The canned page answers what the CLI does (Datasette runs the file's SQL)."""
    import asyncio

    from ckkb.web import app

    ds = app.make_datasette(kb)

    async def go():
        await ds.invoke_startup()
        params = {"from": "old", "to": "new", "arch": "gfx950", "dir": "", "dtype": ""}
        r = await ds.client.get("/kb/version_diff.json", params={**params, "_shape": "array"})
        assert r.status_code == 200, r.text
        page = await ds.client.get("/kb/version_diff", params=params)
        assert page.status_code == 200
        assert "From old to new: <b>2 added, 1 removed</b>, 3 changed" in page.text
        assert "one row per arch: gfx950" in page.text
        return r.json()

    rows = asyncio.run(go())
    res = answer(kb, "old", "new", "--arch", "gfx950")["instances"]
    for change in ("added", "removed"):
        assert len([r for r in rows if r["change"] == change]) == len(res[change])
    assert sorted(r["to_line"] for r in rows if r["change"] == "changed") == sorted(
        int(i["to"].rsplit(":", 1)[1]) for i in res["changed"]
    )


def test_aiter_trees_real(kb):
    """With review15's aiter_diff: the contract's sections, tree names kept as from/to."""
    res = answer(kb, "a1", "a2")
    assert (res["from"], res["to"], res["kind"]) == ("a1", "a2", "aiter")
    assert res["trees"]["from"]["name"] == "a1" and res["trees"]["to"]["name"] == "a2"
    assert {"added", "removed", "renumbered"} <= set(res["kernels"])
    assert {"added", "removed", "retimed"} <= set(res["config_rows"])
    assert "rows_kernel_changed" in res


@pytest.mark.parametrize("dir, ctype", [("", ""), ("gemm_universal", "bhalf_t")])
def test_canned_query_equals_a_python_pairing(kb, dir, ctype):
    """The query's GROUP BY pairing and its availability rule, against Python's pairing and the
    ck_instance_availability view of each tree's scoped connection."""
    want = expected_by_python(kb, "old", "new", dir, ctype)
    assert canned_rows(kb, "old", "new", dir, ctype) == want
    assert len([w for w in want if w[0] == "changed"]) == 3
