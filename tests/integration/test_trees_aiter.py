"""The tree matrix, aiter half (issue 13): `ckkb audit` and `ckkb aiter merge` on the default tree
(the wheel's aiter) and on aiter main 2026-08 (../shared/trees). Figures pinned here come from
tests/integration/aiter_census.py, a second method (regular expressions and the csv module,
written apart from ckkb's extractor); the census is run in the test, never copied."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from ckkb.cli import main
from tests.integration import (
    aiter_census,
    aiter_flydsl_census,
    aiter_kernel_census,
    aiter_opus_census,
)


def _json(args: list[str]) -> dict:
    out = CliRunner().invoke(main, args)
    assert out.exit_code in (0, 1), out.output
    return json.loads(out.output)


def test_audit_db_audits_the_aiter_tree_it_was_built_from(shared_trees, shared_dbs):
    root = Path(shared_trees["aiter2026"])
    d = _json(["audit", "--db", str(shared_dbs["aiter2026"]), "--format", "json"])
    assert d["aiter"]["root"] == str(root)
    assert "was built from" in d["aiter"]["tree_source"]
    rules = Counter(f["rule"] for f in d["findings"])
    census = aiter_census.audit_census(root / "aiter")
    # census: duplicate-key 2, us-invalid 256, op-unknown 1 on aiter-2026-08-22
    for rule in ("duplicate-key", "us-invalid", "op-unknown"):
        assert rules[rule] == census[rule], rule
    assert census == {"duplicate-key": 2, "us-invalid": 256, "op-unknown": 1}
    # configs merged at run time from model_configs/ are not reported missing or empty
    assert rules["tuned-empty"] == 0 and rules["default-config-missing"] == 0
    # MoE rows against the MoE tuner's own --errRatio (0.1), GEMM rows against 0.05
    thr = {
        (f["op"], f["evidence"]["threshold"])
        for f in d["findings"]
        if f["rule"] == "err-ratio-high"
    }
    assert {t for op, t in thr if "moe" in (op or "")} == {0.1}
    # every CK and cktile row is checked against the list its tuner's getKernelName picks (the
    # cktile lists built per arch by expand_blockpercu), every moe_ck2stages name of the MoE
    # configs against what the tuner's getters build for its row, every opus row against the
    # opus list its tuner imports, every FlyDSL row of the a8w8 bpreshuffle tuner against the
    # lists it races on the row's arch. Left unchecked, each op an error naming the reason
    # (census by csv and grep, tests/integration/aiter_opus_census.py): two ops no tuner
    # imports the config of
    unchecked = aiter_opus_census.unchecked_census(root)
    assert unchecked == {"fhmoe": 24, "batched_gemm_a8w8_blockscale_mxscale": 77}
    got = {
        f["op"]: f["evidence"]["rows"]
        for f in d["findings"]
        if f["rule"] == "kernel-list-unresolved"
    }
    assert got == unchecked
    assert sum(f["no_kernel_list"] for f in d["files"]) == sum(unchecked.values())
    # second method: tests/integration/aiter_kernel_census.py (ast, name properties written out
    # by hand, the tuners' list choice read by hand, csv): 44,257 rows, 169 whose kernelId and
    # kernelName disagree (cktile rows tuned before kernels_list_95x gained id 12), none stale
    kc = aiter_kernel_census.id_name_census(root)
    total = Counter()
    for c in kc.values():
        total.update(c)
    assert sum(total.values()) == 44_257
    # the MoE names by the census's hand-written getters (ast, csv): 1,902, all as built
    moe = aiter_kernel_census.moe_census(root)
    assert moe == Counter({"ok": 1_902})
    # the opus rows, by the census that runs opus_gemm_common.py with Python itself: 386 bf16
    # rows (solidx) and 56 blockscale rows (kernelId 11000), all as built
    opus = aiter_opus_census.opus_census(root)
    assert opus == {"bf16": Counter({"ok": 386}), "blockscale": Counter({"ok": 56})}
    # the FlyDSL rows, by the census that runs the FlyDSL modules with Python itself
    # (aiter_flydsl_census.py): 873 rows; by class, summed over gfx950 and gfx1250
    fly = Counter()
    for (_gfx, cls), n in aiter_flydsl_census.flydsl_census(root).items():
        fly[cls] += n
    assert fly == Counter({"ok": 449, "mismatch": 226, "stale": 164, "unknown": 34})
    checked = 44_257 + 1_902 + 386 + 56 + 873
    assert sum(f["kernel_checked"] for f in d["files"]) == checked
    assert rules["kernel-id-name-mismatch"] == total["mismatch"] + fly["mismatch"] == 169 + 226
    assert rules["kernel-name-stale"] == total["stale"] + moe["stale"] + fly["stale"] == 164
    assert rules["kernel-id-unknown"] == total["unknown"] + fly["unknown"] == 34
    # aiter_kernel_usage adds up to every checked reference: 47,474 (46,159 before the opus
    # and FlyDSL references, checked against lists the audit builds, were added)
    conn = sqlite3.connect(shared_dbs["aiter2026"])
    (usage,) = conn.execute("select sum(tuned_rows) from aiter_kernel_usage").fetchone()
    conn.close()
    assert usage == checked == 47_474


def test_flydsl_lists_as_python_builds_them(shared_trees):
    """ckkb's static run of the FlyDSL tune-space modules against Python running them
    (aiter_flydsl_census.py): the same {id: name} for each list on each arch the configs name."""
    from ckkb.audit.list_eval import EvaluatedLists

    root = Path(shared_trees["aiter2026"])
    ev = EvaluatedLists(root, None)
    tune = "aiter/ops/flydsl/gemm_tune/"
    for gfx, lists in aiter_flydsl_census.lists_by_arch(root).items():
        if gfx == "gfx1250":
            ours = [
                ev.names(tune + "flydsl_gemm_a8w8_bpreshuffle_wmma_common.py", "kernels_list", gfx)
            ]
        else:
            f = tune + "flydsl_gemm_a8w8_bpreshuffle_common.py"
            ours = [ev.names(f, n, gfx) for n in ("kernels_list", "kernels_list_8wave")]
        assert ours == lists, gfx
    assert [len(x) for x in aiter_flydsl_census.lists_by_arch(root)["gfx950"]] == [2312, 36]


def test_merge_on_aiter_2026_previews_what_the_runtime_merges(shared_trees):
    root = Path(shared_trees["aiter2026"])
    d = _json(["aiter", "merge", "gemm_a8w8_blockscale", "--aiter", str(root), "--json"])
    files = aiter_census.merged_files(
        root / "aiter", "a8w8_blockscale_tuned_gemm", "a8w8_blockscale_tuned_gemm.csv"
    )
    assert [f["file"] for f in d["files"]] == [
        "aiter/" + p.relative_to(root / "aiter").as_posix() for p in files
    ]
    rows = sum(aiter_census.data_rows(p) for p in files)
    assert (len(files), rows) == (10, 39_130)  # the census's figures on aiter-2026-08-22
    assert sum(f["rows"] for f in d["files"]) == rows
    assert d["rule"]["id"] == "reject-duplicates-fill"
    assert d["merge_key"] == ["M", "N", "K", "cu_num", "gfx"]
    # fmoe: 31 files; the csv module's records (what pandas reads, short rows padded) are the
    # rows ckkb reads plus the ones it reports as input-error (19 rows one field short)
    m = _json(["aiter", "merge", "fmoe", "--aiter", str(root), "--json"])
    files = aiter_census.merged_files(root / "aiter", "tuned_fmoe", "tuned_fmoe.csv")
    assert [f["file"] for f in m["files"]] == [
        "aiter/" + p.relative_to(root / "aiter").as_posix() for p in files
    ]
    records = sum(aiter_census.data_rows(p) for p in files)
    assert sum(f["rows"] + f["rows_unread"] for f in m["files"]) == records == 2_402
    assert sum(f["rows_unread"] for f in m["files"]) == 19


def test_default_tree_audit_and_merge(wheel_trees, wheel_db):
    d = _json(["audit", "--db", str(wheel_db), "--format", "json"])
    assert d["aiter"]["root"] == str(wheel_trees["aiter"].root)
    assert "wheel" in d["aiter"]["tree_source"]
    pkg = Path(wheel_trees["aiter"].package_dir)
    m = _json(["aiter", "merge", "gemm_a8w8", "--json"])
    files = aiter_census.merged_files(pkg, "a8w8_tuned_gemm", "a8w8_tuned_gemm.csv")
    assert [f["rows"] for f in m["files"]] == [aiter_census.data_rows(p) for p in files]
    assert m["rule"]["id"] == "keep-fastest"


def _summary_paths(s: dict) -> list[str]:
    out = [f["file"] for f in s["kernel_files"]] + list(s["unassigned_tuned_files"])
    for o in s["ops"]:
        out += [o["kernel_list_file"]] if o["kernel_list_file"] else []
        out += [c[0] for c in o["kernel_list_candidates"]] + list(o["tuned_files"])
        out += [b["file"] for b in o["kernel_lists_by_row"] if "file" in b]
    return out


def test_summary_points_only_at_files_that_exist(shared_trees, wheel_trees):
    """On both aiter trees every file `ckkb aiter summary` names exists (`aiter/...` under the
    package's parent, the rest under the tree root, as AiterTree.rel writes them)."""
    from ckkb.sources import aiter_tree

    t2026 = aiter_tree(str(shared_trees["aiter2026"]))
    for tree, args in ((wheel_trees["aiter"], []), (t2026, ["--aiter", str(t2026.root)])):
        s = _json(["aiter", "summary", "--json", *args])
        paths = _summary_paths(s)
        assert len(paths) > 20
        for p in paths:
            base = tree.package_dir.parent if p.startswith("aiter/") else tree.root
            assert (Path(base) / p).is_file(), p
    # aiter 2026: the cktile lists each op's rows index, per arch
    ops = {o["op"]: o for o in s["ops"]}
    tile = [
        b
        for b in ops["gemm_a8w8_blockscale"]["kernel_lists_by_row"]
        if b["when"].get("libType") == "cktile"
    ]
    assert {b["list"] for b in tile} == {"candidate_kernels_cktile_dict"}
