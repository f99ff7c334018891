"""Issue 15's acceptance for `ckkb diff`: between the wheel's CK (1.2.0) and the 2024-10 tree
(1.1.0, ../shared/trees), for gemm_universal bf16 on gfx942, the instances present in one tree
and not the other, by identity.

Second method, written apart from the extractor (`_entries_by_grep`): a regular expression over
the raw lines of every file under gpu/gemm_universal/ picks the `Device...<...>` tuple rows
(commented-out ones too, as the extractor keeps them), splits their arguments at top-level
commas, drops whitespace, spells BF16 as bhalf_t, and keeps rows whose A, B and C data types
(arguments 4 to 6) are all bhalf_t. Identity is (template, arguments); the n-th occurrence in one
tree pairs with the n-th of the other in (file, line) order. The pinned figures (113 and 163
rows, 60 added, 10 removed) are that script's, run once by hand on the two trees as well.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckkb import pipeline
from ckkb.cli import main
from ckkb.kb.build import build
from ckkb.kb.build.trees import merged
from ckkb.queries import sql
from tests.conftest import SHARED
from tests.versions_check import canned_rows, expected_by_python

UNIVERSAL = "library/src/tensor_operation_instance/gpu/gemm_universal"
ENTRY = re.compile(r"^\s*(//\s*)?(Device\w+)\s*<(.*)>\s*,?\s*(//.*)?$")

# from `_entries_by_grep` (see the module docstring)
ROWS = {"1.1.0": 113, "1.2.0": 163}
ADDED, REMOVED = 60, 10
ADDED_BY_TEMPLATE = {"DeviceGemm_Wmma_CShuffleV3": 51, "DeviceGemm_Xdl_CShuffleV3": 9}
REMOVED_TILES = Counter({"32x16x64": 4, "16x32x64": 4, "16x16x64": 2})

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared is absent")


@pytest.fixture(scope="module")
def two_ck(tmp_path_factory, wheel_db, shared_trees):
    """A knowledge base holding the wheel's trees, the 2024-10 CK tree and aiter 2026-08: the
    wheel's database, copied (with its cache), with the shared trees added as `ckkb build --ck
    PATH --aiter PATH` adds them."""
    path = tmp_path_factory.mktemp("two_ck") / "kb.db"
    shutil.copy(wheel_db, path)
    cache = Path(f"{wheel_db}.cache")
    if cache.exists():
        shutil.copy(cache, f"{path}.cache")
    given = [
        ("ck", None, str(shared_trees["ck2024"])),
        ("aiter", None, str(shared_trees["aiter2026"])),
    ]
    trees = merged(path, given)
    build(path, trees, jobs=2, stages=pipeline.stages())
    return path


def _split(args: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in args:
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def _entries_by_grep(root: Path) -> dict[tuple[str, tuple[str, ...]], list[str]]:
    """(template, arguments) -> sorted file:line of each gemm_universal bf16 tuple row."""
    found: dict[tuple[str, tuple[str, ...]], list[tuple[str, int]]] = defaultdict(list)
    for f in sorted((root / UNIVERSAL).rglob("*")):
        if not f.is_file():
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = ENTRY.match(line)
            if not m:
                continue
            args = [re.sub(r"\s+", "", a) for a in _split(m.group(3))]
            args = ["bhalf_t" if a in ("BF16", "ck::bhalf_t") else a for a in args]
            if args[3:6] == ["bhalf_t"] * 3:
                found[(m.group(2), tuple(args))].append((str(f.relative_to(root)), n))
    return {k: [f"{f}:{n}" for f, n in sorted(v)] for k, v in found.items()}


def _grep_diff(old: Path, new: Path) -> tuple[list[str], list[str], int, int]:
    a, b = _entries_by_grep(old), _entries_by_grep(new)
    added = [at for k, v in b.items() for at in v[len(a.get(k, [])) :]]
    removed = [at for k, v in a.items() for at in v[len(b.get(k, [])) :]]
    return sorted(added), sorted(removed), sum(map(len, a.values())), sum(map(len, b.values()))


def _diff(db: Path, *args: str) -> dict:
    r = CliRunner().invoke(main, ["diff", *args, "--db", str(db), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_tree_names(two_ck):
    r = CliRunner().invoke(main, ["trees", "--db", str(two_ck), "--json"])
    names = {(t["name"], t["kind"]) for t in json.loads(r.output)["trees"]}
    assert {("1.2.0", "ck"), ("1.1.0", "ck"), ("aiter", "aiter")} <= names


def test_gemm_universal_bf16_gfx942(two_ck, shared_trees, wheel_trees):
    old, new = Path(shared_trees["ck2024"]), Path(wheel_trees["ck"].root)
    added, removed, rows_old, rows_new = _grep_diff(old, new)
    assert (rows_old, rows_new) == (ROWS["1.1.0"], ROWS["1.2.0"])
    assert (len(added), len(removed)) == (ADDED, REMOVED)

    res = _diff(
        two_ck, "1.1.0", "1.2.0", "--dir", "gemm_universal", "--dtype", "bf16", "--arch", "gfx942"
    )
    assert res["archs"] == [{"arch": "gfx942", "from": True, "to": True, "compared": True}]
    inst = res["instances"]
    assert sorted(i["to"] for i in inst["added"]) == added
    assert sorted(i["from"] for i in inst["removed"]) == removed
    assert Counter(i["template"] for i in inst["added"]) == ADDED_BY_TEMPLATE
    assert Counter(i["tile"] for i in inst["removed"]) == REMOVED_TILES
    assert all(i["dtype"] == "bf16" and i["dir"] == "gemm_universal" for i in inst["added"])
    # the WMMA instances 1.2.0 adds are not built for gfx942; the XDL ones are
    wmma = [i for i in inst["added"] if "Wmma" in i["template"]]
    assert {i["available"]["gfx942"] for i in wmma} == {False}
    # the other way round, the same lists swap sides
    back = _diff(
        two_ck, "1.2.0", "1.1.0", "--dir", "gemm_universal", "--dtype", "bf16", "--arch", "gfx942"
    )["instances"]
    assert sorted(i["from"] for i in back["removed"]) == added
    assert sorted(i["to"] for i in back["added"]) == removed


def test_canned_query_answers_the_same(two_ck):
    conn = sqlite3.connect(two_ck)
    params = {
        "from": "1.1.0",
        "to": "1.2.0",
        "arch": "gfx942",
        "dir": "gemm_universal",
        "dtype": "bhalf_t",
        "layout": "",
    }
    cur = conn.execute(sql("version_diff"), params)
    cols = [d[0] for d in cur.description]
    page = [dict(zip(cols, r, strict=True)) for r in cur]
    res = _diff(
        two_ck, "1.1.0", "1.2.0", "--dir", "gemm_universal", "--dtype", "bf16", "--arch", "gfx942"
    )["instances"]
    for change, side in (("added", "to"), ("removed", "from")):
        assert sorted(
            f"{r[side + '_file']}:{r[side + '_line']}" for r in page if r["change"] == change
        ) == sorted(i[side] for i in res[change])
    assert len([r for r in page if r["change"] == "changed"]) == len(res["changed"])


def test_arch_one_tree_knows(two_ck):
    """gfx950 is an arch of 1.2.0's CMake, not of 1.1.0's: said, and not compared."""
    res = _diff(
        two_ck, "1.1.0", "1.2.0", "--dir", "gemm_universal", "--dtype", "bf16", "--arch", "gfx950"
    )
    assert res["archs"] == [{"arch": "gfx950", "from": False, "to": True, "compared": False}]
    inst = res["instances"]
    assert (len(inst["added"]), len(inst["removed"]), inst["changed"]) == (ADDED, REMOVED, [])
    assert {tuple(i["available"]) for i in inst["added"]} == {("gfx950",)}
    assert {tuple(i["available"]) for i in inst["removed"]} == {()}


AITER_LIST = "csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py"


def _ids_by_grep(root: Path, name: str) -> dict[tuple[str, ...], int]:
    """Second method: params (as written, spaces dropped) -> id of each live entry of the dict
    literal NAME in AITER_LIST."""
    text = (root / AITER_LIST).read_text()
    block = text[text.index(f"{name}= {{") :]
    block = block[: block.index("}")]
    out = {}
    for m in re.finditer(r"^\s*(\d+):\s*kernelInstance\w*\(([^)]*)\)", block, re.M):
        out[tuple(a.strip() for a in m.group(2).split(",") if a.strip())] = int(m.group(1))
    return out


def test_aiter_trees(two_ck, shared_trees):
    """aiter 2026-08 against the wheel's aiter: renumbered kernel ids (checked against a grep of
    the kernel list, and by hand once: the wheel's id 1 (256, 16, 128, 256, 1, 4, 1) is id 0 in
    2026-08, its id 0 (256, 64, 128, 128, 1, 4, 3) is id 3) and re-timed config rows."""
    import importlib.util

    wheel = Path(importlib.util.find_spec("aiter_meta").submodule_search_locations[0])
    res = _diff(two_ck, "0.1.7.post2.dev18", "aiter")
    assert (res["from"], res["to"], res["kind"]) == ("0.1.7.post2.dev18", "aiter", "aiter")
    name = "a8w8_gemm1_blockscale_kernels_list"
    old, new = _ids_by_grep(wheel, name), _ids_by_grep(shared_trees["aiter2026"], name)
    moved_by_grep = sorted((old[p], new[p]) for p in old.keys() & new.keys() if old[p] != new[p])
    assert moved_by_grep == [(0, 3), (1, 0)]
    moved = sorted(
        (k["from_ids"][0], k["to_ids"][0])
        for k in res["kernels"]["renumbered"]
        if k["kind"] == "moved" and k["list"] == name
    )
    assert moved == moved_by_grep
    # Kernel names: the wheel composes "silu" if self.ActOP else "gelu" over ActOP False, aiter
    # 2026-08 ACT_OP_NAME[self.ActOP] over ActOP 0 (a dict built from ACT_OP_MAP); both read
    # gelu. Second method: each moved entry's name composed by hand from its grepped arguments
    # (BLOCK_SIZE, MPerBlock, NPerBlock, KPerBlock, MWaves, NWaves, GemmPipelineVersion; the
    # other fields' defaults: TypeCast, Nswizzle0, Quant1, MulRoutedWeight0, gelu, three empty
    # dtypes), checked by hand once: the wheel's id 1 (256, 16, 128, 256, 1, 4, 1) is
    # moe_ck2stages_gemm1_256x16x128x256_1x4_TypeCast_v1_Nswizzle0_Quant1_MulRoutedWeight0_gelu___
    by_id = {v: k for k, v in new.items()}
    for k in res["kernels"]["renumbered"]:
        if k["kind"] != "moved" or k["list"] != name:
            continue
        b, m, n, kk, mw, nw, v = by_id[k["to_ids"][0]]
        assert k["kernel"] == (
            f"moe_ck2stages_gemm1_{b}x{m}x{n}x{kk}_{mw}x{nw}_TypeCast_v{v}_Nswizzle0_Quant1_"
            "MulRoutedWeight0_gelu___"
        )
    # the same kernel named by each version's own code: the wheel's id 1 is 2026-08's id 0
    reassigned = {
        k["id"]: (k["from_kernel"], k["to_kernel"])
        for k in res["kernels"]["renumbered"]
        if k["kind"] == "reassigned" and k["list"] == name
    }
    assert reassigned[1][0] == reassigned[0][1] is not None
    retimed = res["config_rows"]["retimed"]
    assert retimed and all(r["from"]["us"] != r["to"]["us"] for r in retimed)
    r = CliRunner().invoke(main, ["diff", "0.1.7.post2.dev18", "aiter", "--db", str(two_ck)])
    assert r.exit_code == 0 and "ids [1] -> [0]" in r.output


def test_canned_query_equals_a_python_pairing(two_ck):
    """gemm_universal (every data type, every arch both trees build for): the query's pairing and
    availability against Python's pairing and each tree's ck_instance_availability view."""
    want = expected_by_python(two_ck, "1.1.0", "1.2.0", "gemm_universal", "")
    assert canned_rows(two_ck, "1.1.0", "1.2.0", "gemm_universal", "") == want
    assert len(want) > 100
