"""The tree matrix, aiter half (issue 13): `ckkb audit` and `ckkb aiter merge` on the default tree
(the wheel's aiter) and on aiter main 2026-08 (../shared/trees). Figures pinned here come from
tests/integration/aiter_census.py, a second method (regular expressions and the csv module,
written apart from ckkb's extractor); the census is run in the test, never copied."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from ckkb.cli import main
from tests.integration import aiter_census


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
    # ops whose rows cannot be checked are named, not skipped silently
    unresolved = {f["op"] for f in d["findings"] if f["rule"] == "kernel-list-unresolved"}
    assert unresolved == {
        "gemm_a8w8_blockscale",
        "gemm_a8w8_blockscale_bpreshuffle",
        "gemm_a8w8_bpreshuffle",
    }
    checked = sum(f["kernel_checked"] for f in d["files"])
    unchecked = sum(f["no_kernel_list"] for f in d["files"])
    assert unchecked == sum(
        f["evidence"]["rows"] for f in d["findings"] if f["rule"] == "kernel-list-unresolved"
    )
    assert checked > 40_000  # was 749 of 54,028 tuned rows before the lists were followed


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


def test_default_tree_audit_and_merge(wheel_trees, wheel_db):
    d = _json(["audit", "--db", str(wheel_db), "--format", "json"])
    assert d["aiter"]["root"] == str(wheel_trees["aiter"].root)
    assert "wheel" in d["aiter"]["tree_source"]
    pkg = Path(wheel_trees["aiter"].package_dir)
    m = _json(["aiter", "merge", "gemm_a8w8", "--json"])
    files = aiter_census.merged_files(pkg, "a8w8_tuned_gemm", "a8w8_tuned_gemm.csv")
    assert [f["rows"] for f in m["files"]] == [aiter_census.data_rows(p) for p in files]
    assert m["rule"]["id"] == "keep-fastest"
