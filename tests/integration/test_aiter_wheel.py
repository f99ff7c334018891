"""aiter kernel lists, tuned configs and the audit on
the installed amd-aiter wheel (numbers pinned)."""

from __future__ import annotations

import json
from collections import Counter

import jsonschema
import pytest

from ckkb import pipeline
from ckkb.audit.context import add_default_tables, load_tree
from ckkb.audit.engine import audit
from ckkb.audit.rules_keys import merge_preview
from ckkb.audit.summary import summary
from ckkb.audit.writers import to_sarif
from ckkb.kb.build import build
from ckkb.kb.db import open_db
from tests.unit.test_sarif import SARIF_2_1_0_SUBSET

# op -> (kernel ids in the list its tuner indexes, tuned rows in its files)
PINNED_OPS = {
    "gemm_a4w4": (20, 922),
    "gemm_a8w8": (86, 481),
    "gemm_a8w8_bpreshuffle": (159, 1018),
    "gemm_a8w8_blockscale": (19, 847),
    "fmoe": (0, 773),
    "gemm_a8w8_blockscale_bpreshuffle": (18, 717),
    "a8w8_batched_gemm": (86, 26),
    "bf16_batched_gemm": (86, 26),
    "gemm_bf16": (0, 8),
}


@pytest.fixture(scope="module")
def ctx(wheel_trees):
    c = load_tree(wheel_trees["aiter"])
    add_default_tables(c)
    return c


@pytest.fixture(scope="module")
def result(wheel_trees):
    return audit(None)


def test_kernel_lists_ids_and_tuned_rows_per_op(ctx):
    s = summary(ctx)
    assert {o["op"]: (o["kernel_ids"], o["tuned_rows"]) for o in s["ops"]} == PINNED_OPS
    assert s["totals"] == {
        "kernel_files": 10,
        "kernel_lists": 40,
        "kernel_ids": 640,
        "tuned_files": 13,
        "tuned_rows": 4852,
    }
    files = {f["file"]: f["by_list"] for f in s["kernel_files"]}
    assert files["csrc/ck_gemm_a8w8/gemm_a8w8_common.py"] == {
        "kernels_list": 86,
        "default_kernels_dict": 9,
    }
    assert len(files["csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py"]) == 16


def test_every_ck_tuned_row_is_checked_against_its_kernel_list(result):
    checked = {
        f["file"]: (f["kernel_checked"], f["not_ck"], f["no_kernel_list"])
        for f in result.files
        if f["kind"] == "tuned"
    }
    assert checked["aiter/configs/a8w8_tuned_gemm.csv"] == (481, 0, 0)
    assert checked["aiter/configs/a4w4_blockscale_tuned_gemm.csv"] == (
        126,
        796,
        0,
    )  # 796 ASM rows (mangled _Z names)
    assert checked["aiter/configs/a8w8_bpreshuffle_tuned_gemm.csv"] == (666, 35, 0)
    assert sum(c for c, _, _ in checked.values()) == 3206
    # every file with kernelId rows has its kernel list; no CK row is left unchecked. The MoE
    # config's kernelName1/kernelName2 (no kernelId; lists built per call from dtypes) are
    # counted as not checked: 1,306 named cells of tuned_fmoe.csv (csv census)
    from ckkb.sources import default_aiter_tree
    from tests.integration import aiter_census

    pkg = default_aiter_tree().package_dir
    moe = aiter_census.moe_kernel_names(pkg, "tuned_fmoe")
    assert moe == 1_306
    unchecked = {f["file"]: f["no_kernel_list"] for f in result.files if f["no_kernel_list"]}
    assert set(unchecked) <= {"aiter/configs/tuned_fmoe.csv"} | {
        f for f in unchecked if "model_configs/" in f and "fmoe" in f
    }
    assert sum(unchecked.values()) == moe
    # why: the wheel's MoE tuner calls get_gemm1_kernels_list with 7 arguments, and the wheel's
    # getter takes 8 with no default for `preshuffle` (read with ast below): a TypeError when it
    # tunes, so no row's list can be built
    import ast
    from pathlib import Path

    root = Path(default_aiter_tree().root)
    common = root / "csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py"
    fn = next(
        n
        for n in ast.parse(common.read_text()).body
        if isinstance(n, ast.FunctionDef) and n.name == "get_gemm1_kernels_list"
    )
    assert (len(fn.args.args), len(fn.args.defaults)) == (8, 0)
    tuner = root / "hsa/gfx942/fmoe_2stages/tune.py"
    calls = [
        n
        for n in ast.walk(ast.parse(tuner.read_text()))
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "get_gemm1_kernels_list"
    ]
    assert [len(c.args) + len(c.keywords) for c in calls] == [7]
    f = next(f for f in result.findings if f.rule == "kernel-list-unresolved")
    assert f.op == "fmoe" and "argument preshuffle missing" in f.message
    rules = Counter(f.rule for f in result.findings)
    assert (
        rules["kernel-id-unknown"] == 0 and rules["kernel-name-stale"] == 0
    )  # the static names match all 3206 rows


def test_known_defects_of_the_default_wheel(result):
    by = Counter(f.rule for f in result.findings)
    assert (
        by["default-config-missing"] == 1
    )  # AITER_CONFIG_GEMM_BF16 -> aiter/configs/tuned_gemm.csv
    assert (
        by["kernel-id-duplicate"] == 1
    )  # moe_cktile2stages a8w8_gemm1_kernels_list_gfx950: id 4 twice
    assert by["kernel-duplicate"] == 27
    assert by["merge-drops-rows"] == 4 and by["merge-collision"] == 280
    # 9 files with splitK all 0 (csv module) whose tuner reads args.splitK (grep): tuned_fmoe.csv's
    # all-zero ksplit is no longer one: hsa/gfx94*/fmoe_2stages/tune.py never reads args.splitK
    assert by["splitk-never-searched"] == 9 and by["us-invalid"] == 1
    f = next(f for f in result.findings if f.rule == "default-config-missing")
    assert (f.file, f.line, f.evidence["default_path"]) == (
        "aiter/jit/core.py",
        183,
        "aiter/configs/tuned_gemm.csv",
    )


def test_merge_preview_blockscale(ctx):
    p = merge_preview(ctx, ctx.runtime_for("gemm_a8w8_blockscale"))
    assert (p["rule"]["id"], p["rule"]["file"], p["rule"]["line"]) == (
        "keep-fastest",
        "aiter/jit/core.py",
        106,
    )
    assert [f["file"] for f in p["files"]] == [
        "aiter/configs/a8w8_blockscale_tuned_gemm.csv",
        "aiter/configs/model_configs/a8w8_blockscale_tuned_gemm_ds_v3.csv",
    ]
    assert p["merged_rows"] == 616 and len(p["losers"]) == 231
    assert p["dropped_by_cu_num"] == {"256": 25, "304": 89, "80": 117}
    assert len(p["gfx_missing"]) == 847  # this wheel's CSVs have no gfx column


def test_sarif_of_the_wheel_validates(result):
    jsonschema.validate(json.loads(json.dumps(to_sarif(result), default=str)), SARIF_2_1_0_SUBSET)


def test_aiter_stages_build(tmp_path, wheel_trees):
    path = tmp_path / "aiter.db"
    s = build(path, {"aiter": wheel_trees["aiter"]}, jobs=1, stages=pipeline.stages())
    assert s.tables["aiter_kernel_lists"] == 40 and s.tables["aiter_kernels"] == 640
    assert s.tables["aiter_runtime_configs"] == 9 and s.tables["aiter_config_files"] == 29
    db = open_db(path, readonly=True)
    n = db.execute("select count(*) from aiter_config_rows where kind = 'tuned'").fetchone()[0]
    assert n == 4852  # 13 tuned files, asm_a8w8_gemm.csv (no op) included
    assert (
        db.execute(
            "select count(*) from aiter_audit_findings where rule = 'merge-drops-rows'"
        ).fetchone()[0]
        == 4
    )
    db.close()


def test_tile_gate_rule_against_the_wheel_knowledge_base(wheel_db, wheel_trees):
    """aiter's CK kernels against CK's own XDL GEMM instances:
    many have a counterpart, none is gated away on both."""
    from ckkb.audit.rules_kb import CkIndex

    db = open_db(wheel_db, readonly=True)
    idx = CkIndex.from_db(db)
    n_findings = db.execute(
        "select count(*) from aiter_audit_findings where rule = 'tile-gated'"
    ).fetchone()[0]
    db.close()
    c = load_tree(wheel_trees["aiter"])
    matched = 0
    for k in c.kernels:
        if k.op == "gemm_a8w8" and k.list_name == "kernels_list":
            m, gate = idx.gated(k, "gemm_a8w8", "gfx950")
            matched += bool(m)
            assert gate is None
    assert matched > 0
    assert n_findings == 0
