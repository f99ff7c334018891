"""aiter's rules read from the tree (issue 13): tests/fixtures/aiter_2026_mini is an aiter tree in
the layout of aiter main 2026-08 (configs as properties of a class in core.py, a merge that unions
columns and keys on untuned columns + cu_num + gfx + _tag, annotated ARG_DEFAULTS, kernel lists
in another directory, a docstring in a name property). Each test failed before the fix."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from ckkb.audit.context import add_default_tables, load_tree
from ckkb.audit.engine import audit
from ckkb.audit.rules_keys import merge_preview
from ckkb.cli import main
from ckkb.sources import aiter_tree

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "aiter_2026_mini"
A8 = "aiter/configs/a8w8_tuned_gemm.csv"
MODEL = "aiter/configs/model_configs/dsx_a8w8_tuned_gemm.csv"


def _audit():
    return audit(str(TREE), db_path="/nonexistent/ckkb.db")


def _by(rule, r=None):
    r = r or _audit()
    return [(f.file, f.line) for f in r.findings if f.rule == rule]


def test_runtime_configs_read_from_class_properties():
    ctx = load_tree(aiter_tree(str(TREE)))
    rc = {r.op: r for r in ctx.runtime}
    assert set(rc) == {"gemm_a8w8", "fmoe", "gemm_two"}
    a8 = rc["gemm_a8w8"]
    assert (a8.attribute, a8.tuned_name) == ("AITER_CONFIG_GEMM_A8W8_FILE", "a8w8_tuned_gemm")
    assert a8.model_configs == [MODEL]
    assert a8.merge_rule == "reject-duplicates-fill"
    # untuned header + what core.py appends (cu_num, gfx, _tag)
    assert a8.merge_key == ["M", "N", "K", "cu_num", "gfx", "_tag"]


def test_duplicate_key_uses_the_merge_key_not_column_names():
    # lines 2/3 differ only in gfx, 2/4 only in _tag: not duplicates; 6/7 are
    dups = _by("duplicate-key")
    assert (A8, 7) in dups and (A8, 3) not in dups and (A8, 4) not in dups
    # tuned_fmoe: lines 2/3 differ in doweight_stage1 (an untuned column); 3/4 do not
    assert [d for d in dups if d[0] == "aiter/configs/tuned_fmoe.csv"] == [
        ("aiter/configs/tuned_fmoe.csv", 4)
    ]
    # gate_mode (untuned only) is dropped from the key as core.py does: not a missing column
    assert _by("key-columns-missing") == []


def test_model_configs_are_merged_like_core_py():
    r = _audit()
    rules = Counter(f.rule for f in r.findings)
    # model_configs files have an op; the empty default of gemm_two is merged with a model file
    assert rules["op-unknown"] == 0
    assert rules["tuned-empty"] == 0 and rules["default-config-missing"] == 0
    ctx = load_tree(aiter_tree(str(TREE)))
    add_default_tables(ctx)
    rc = next(x for x in ctx.runtime if x.op == "gemm_two")
    p = merge_preview(ctx, rc)
    assert [f["file"] for f in p["files"]] == [
        "aiter/configs/two_tuned_gemm.csv",
        "aiter/configs/model_configs/m1_two_tuned_gemm.csv",
    ]
    assert p["rows"] == 4 and p["merged_rows"] == 4 and not p["errors"]


def test_merge_cli_previews_the_model_files():
    out = CliRunner().invoke(main, ["aiter", "merge", "gemm_a8w8", "--aiter", str(TREE), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert [f["file"] for f in d["files"]] == [A8, MODEL]


def test_thresholds_are_each_tuners_own():
    f = [f for f in _audit().findings if f.rule == "err-ratio-high"]
    # MoE err1 0.08 passes the MoE tuner's 0.1 (it failed the base tuner's 0.05); err2 0.2 does not
    assert [(x.file, x.line, x.evidence["threshold"]) for x in f] == [
        ("aiter/configs/tuned_fmoe.csv", 3, 0.1)
    ]


def test_new_value_rules():
    r = _audit()
    assert (A8, 5) in _by("us-invalid", r)  # us=inf
    assert _by("err-ratio-invalid", r) == [(A8, 6), (A8, 8)]  # NaN, negative
    assert _by("shape-invalid", r) == [(A8, 8)]  # M=0
    assert _by("splitk-negative", r) == [(A8, 8)]
    assert _by("conflict-marker", r) == [(MODEL, 3), (MODEL, 5), (MODEL, 7)]


def test_kernel_lists_found_through_tuner_imports():
    r = _audit()
    a8 = next(f for f in r.files if f["file"] == A8)
    # the list in csrc/ck_shared_lists (found via sys.path.insert), names evaluated despite the
    # docstring: every CK row checked
    assert a8["kernel_checked"] == 7 and a8["no_kernel_list"] == 0
    assert not [f for f in r.findings if f.rule == "kernel-list-unsupported"]


def test_unresolved_kernel_list_is_an_error_naming_op_and_reason():
    r = _audit()
    (f,) = [f for f in r.findings if f.rule == "kernel-list-unresolved"]
    assert f.severity == "error" and f.op == "gemm_two" and f.evidence["rows"] == 2
    assert "imports 2 kernel lists" in f.message
    # kernelId 0 is two_b_64, not two_b_128 (which is id 1): the two disagree
    assert _by("kernel-id-name-mismatch", r) == [
        ("aiter/configs/model_configs/m1_two_tuned_gemm.csv", 4)
    ]


def test_summary_points_only_at_files_that_exist():
    out = CliRunner().invoke(main, ["aiter", "summary", "--aiter", str(TREE), "--json"])
    assert out.exit_code == 0, out.output
    ops = {o["op"]: o for o in json.loads(out.output)["ops"]}
    assert ops["gemm_a8w8"]["kernel_list_file"] == "csrc/ck_shared_lists/gemm_a8w8_common.py"
    assert ops["gemm_two"]["kernel_list_file"] is None and ops["gemm_two"]["kernel_list_note"]
    for o in ops.values():
        for f in [o["kernel_list_file"]] + [c[0] for c in o["kernel_list_candidates"]]:
            assert f is None or (TREE / f).is_file()


def test_a_kb_from_an_older_ckkb_is_not_trusted(tmp_path):
    """`ckkb audit --db X` on a KB whose aiter tables lack this ckkb's columns extracts the tree
    (it used to end in a traceback once a column was added)."""
    from ckkb.audit.context import load
    from ckkb.kb import db as kbdb

    path = tmp_path / "old.db"
    db = kbdb.open_db(path, create=True)
    tree = aiter_tree(str(TREE))
    kbdb.set_info(db, "trees", json.dumps({"aiter": str(tree.root)}))
    db["sources"].insert({"id": 1, "kind": "aiter", "path": str(tree.root), "name": "t"})
    db["aiter_runtime_configs"].transform(drop={"kernel_list_note"})
    db.close()
    ctx, read_from = load(tree, path)
    assert read_from == "extracted from the tree"
    assert {r.op for r in ctx.runtime} == {"gemm_a8w8", "fmoe", "gemm_two"}
    out = CliRunner().invoke(main, ["audit", "--db", str(path), "--format", "json"])
    assert out.exit_code == 1 and json.loads(out.output)["aiter"]["root"] == str(tree.root)
