"""Every audit rule tripped once by a hand-written file under
tests/fixtures/aiter_mini, and a clean file that trips none."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckkb.audit.engine import audit
from ckkb.audit.model import RULES
from ckkb.cli import main
from ckkb.kb.build.writer import insert_rows
from ckkb.kb.db import open_db
from ckkb.kb.schema.ck_instances import InstanceListRow, InstanceRow
from ckkb.kb.schema.ck_registrations import AvailabilityRow, RegistrationRow
from ckkb.kb.schema.harness import HarnessResultRow

MINI = Path(__file__).resolve().parents[1] / "fixtures" / "aiter_mini"
CASES = MINI / "cases"


def rules_of(result, *, keep_skipped=False):
    return Counter(f.rule for f in result.findings if keep_skipped or f.rule != "rules-skipped")


SINGLE = {
    "kernel_id_unknown": ("kernel-id-unknown", 2, None),
    "kernel_name_stale": ("kernel-name-stale", 2, None),
    "duplicate_key": ("duplicate-key", 3, None),
    "part_unknown": ("part-unknown", 2, None),
    "arch_mismatch": ("arch-mismatch", 2, "gfx950"),
    "fp8_dialect": ("fp8-dialect", 2, None),
    "splitk_never_searched": ("splitk-never-searched", 1, None),
    "us_invalid": ("us-invalid", 2, None),
    "err_ratio_high": ("err-ratio-high", 2, None),
    "tuned_empty": ("tuned-empty", 1, None),
    "mx_scale_block": ("mx-scale-block", 2, None),
    "key_columns_missing": ("key-columns-missing", 1, None),
}


@pytest.mark.parametrize("case", sorted(SINGLE))
def test_each_case_trips_exactly_its_rule_once(case):
    rule, line, arch = SINGLE[case]
    path = next(CASES.glob(f"{case}__*.csv"))
    r = audit(str(MINI), [str(path)], arch=arch)
    assert rules_of(r) == Counter({rule: 1})
    f = next(f for f in r.findings if f.rule == rule)
    assert (f.file, f.line, f.severity) == (str(path), line, RULES[rule].severity)


def test_clean_file_trips_nothing_even_with_arch():
    r = audit(str(MINI), [str(CASES / "clean__a8w8_tuned_gemm.csv")])
    assert rules_of(r) == Counter()
    assert r.files[0]["kernel_checked"] == 4
    r = audit(str(MINI), [str(CASES / "clean__a8w8_tuned_gemm.csv")], arch="gfx942")
    assert rules_of(r) == Counter({"arch-mismatch": 1})  # the clean file holds gfx950 rows too


def test_messages_carry_the_evidence():
    r = audit(str(MINI), [str(CASES / "kernel_name_stale__a8w8_tuned_gemm.csv")])
    f = next(f for f in r.findings if f.rule == "kernel-name-stale")
    assert f.evidence["list_name"] == "mini_a8w8_256x128x128x64_32x32_intrawave_v3_nopad"
    assert (
        f.evidence["kernel_file"] == "csrc/ck_gemm_a8w8/gemm_a8w8_common.py"
        and f.evidence["kernel_line"] == 32
    )
    r = audit(str(MINI), [str(CASES / "mx_scale_block__a4w4_blockscale_tuned_gemm.csv")])
    f = next(f for f in r.findings if f.rule == "mx-scale-block")
    assert "K=4096 split 256 ways (splitK=8) gives K/256=16, not a multiple of 32" in f.message
    r = audit(str(MINI), [str(CASES / "err_ratio_high__a8w8_tuned_gemm.csv")])
    # the a8w8 tuner's own ARG_DEFAULTS errRatio (0.02), not the base tuner's 0.05
    assert next(f for f in r.findings if f.rule == "err-ratio-high").evidence["threshold"] == 0.02


@pytest.mark.parametrize(
    ("a", "b", "rule", "file", "line"),
    [
        ("merge_collision_a", "merge_collision_b", "merge-collision", "merge_collision_a", 2),
        ("merge_drops_a", "merge_drops_b", "merge-drops-rows", "merge_drops_a", 2),
        ("merge_columns_a", "merge_columns_b", "merge-columns-differ", "merge_columns_b", 1),
    ],
)
def test_files_merged_for_one_op(a, b, rule, file, line):
    pa, pb = CASES / f"{a}__a8w8_tuned_gemm.csv", CASES / f"{b}__a8w8_tuned_gemm.csv"
    r = audit(str(MINI), [str(pa), str(pb)])
    assert rules_of(r) == Counter({rule: 1})
    f = next(f for f in r.findings if f.rule == rule)
    assert (Path(f.file).name.split("__")[0], f.line) == (file, line)
    if rule == "merge-collision":
        assert (
            "rule keep-fastest (aiter/jit/core.py:25)" in f.message
            and f.evidence["winner"]["us"] == 9.5
        )


def test_default_set_trips_the_tree_rules_once_each():
    r = audit(str(MINI))
    assert rules_of(r) == Counter(
        {
            "kernel-id-duplicate": 1,
            "kernel-duplicate": 1,
            "kernel-list-unsupported": 2,
            # mini_bf16_tuned_gemm.csv's hipblaslt row: no tuner imports its config, so no list
            # can be read for it (a named error, never a silent skip)
            "kernel-list-unresolved": 1,
            "default-config-missing": 1,
            "merge-collision": 1,
            "merge-drops-rows": 1,
            "merge-columns-differ": 1,
        }
    )
    by_rule = {f.rule: f for f in r.findings}
    assert (by_rule["kernel-id-duplicate"].file, by_rule["kernel-id-duplicate"].line) == (
        "csrc/ck_gemm_a8w8/gemm_a8w8_common.py",
        37,
    )
    assert (by_rule["kernel-duplicate"].line, by_rule["kernel-duplicate"].evidence["same_as"]) == (
        35,
        "1",
    )
    assert (by_rule["default-config-missing"].file, by_rule["default-config-missing"].line) == (
        "aiter/jit/core.py",
        52,
    )
    assert by_rule["merge-drops-rows"].evidence["cu_num"] == 304
    assert (
        by_rule["merge-columns-differ"].file
        == "aiter/configs/model_configs/a4w4_blockscale_tuned_gemm_extra.csv"
    )


def test_env_file_setting_the_FILE_name():
    r = audit(
        str(MINI),
        [str(CASES / "clean__a8w8_tuned_gemm.csv")],
        env_file=str(CASES / "env_file_var_ignored.env"),
    )
    assert rules_of(r) == Counter({"env-file-var-ignored": 1})
    f = next(f for f in r.findings if f.rule == "env-file-var-ignored")
    assert f.line == 2 and "export AITER_CONFIG_GEMM_A8W8 instead" in f.message


def test_env_merging_a_missing_file(tmp_path):
    env = tmp_path / "run.sh"
    clean = CASES / "clean__a8w8_tuned_gemm.csv"
    env.write_text(f"#!/bin/sh\nexport AITER_CONFIG_GEMM_A8W8={clean}:{tmp_path}/gone.csv\n")
    r = audit(str(MINI), env_file=str(env))
    f = next(f for f in r.findings if f.rule == "merge-file-missing")
    assert (f.file, f.line, f.severity) == (
        str(env),
        2,
        "warning",
    ) and "gone.csv does not exist" in f.message
    # the env var replaces the default set: the fixture's model_configs collision is gone
    assert "merge-collision" not in rules_of(r)


# ------------------------------------------------------------- rules that need the knowledge base


@pytest.fixture
def kb(tmp_path):
    path = tmp_path / "kb.db"
    db = open_db(path, create=True)
    insert_rows(
        db,
        [
            InstanceListRow(
                id=1,
                name="device_gemm_xdl_f8_instances",
                dir="gemm_universal",
                file="gpu/gemm_universal/f8.hpp",
                line=10,
                template_params=[],
            ),
            InstanceRow(
                id=1,
                list_id=1,
                list_name="device_gemm_xdl_f8_instances",
                dir="gemm_universal",
                file="gpu/gemm_universal/f8.hpp",
                line=12,
                ordinal=0,
                template="DeviceGemm_Xdl_CShuffleV3",
                status="active",
                a_dtype="f8_t",
                block_size=128,
                tile_m=32,
                tile_n=64,
                tile_k=128,
                mfma_m=16,
                mfma_n=16,
                pipeline="v1",
                scheduler="Interwave",
            ),
            RegistrationRow(
                id=1,
                function="add_f8",
                dir="gemm_universal",
                file="gpu/gemm_universal/add.cpp",
                line=30,
                list_name="device_gemm_xdl_f8_instances",
                list_id=1,
            ),
            AvailabilityRow(registration_id=1, arch="gfx942", available=True),
            AvailabilityRow(
                registration_id=1,
                arch="gfx950",
                available=False,
                layer="registration",
                file="gpu/gemm_universal/add.cpp",
                line=28,
                condition='ck::get_device_name() != "gfx950"',
            ),
            HarnessResultRow(
                run_id="r1",
                device="MI300X",
                arch="gfx942",
                M=1,
                N=1280,
                K=8192,
                dtype="fp8",
                out_dtype="bf16",
                layout="tn",
                regime="warm",
                candidate="torch._scaled_mm",
                status="ok",
                us=8.4,
            ),
            HarnessResultRow(
                run_id="r1",
                device="MI300X",
                arch="gfx942",
                M=1,
                N=1280,
                K=8192,
                dtype="fp8",
                out_dtype="bf16",
                layout="tn",
                regime="cold",
                candidate="torch._scaled_mm",
                status="ok",
                us=7.0,
            ),
            HarnessResultRow(
                run_id="r1",
                device="MI300X",
                arch="gfx942",
                M=1,
                N=1280,
                K=8192,
                dtype="bf16",
                out_dtype="bf16",
                layout="tn",
                regime="warm",
                candidate="torch.linear",
                status="ok",
                us=1.0,
            ),
        ],
    )
    db.close()
    return path


def test_baseline_slower_and_missing(kb):
    r = audit(str(MINI), [str(CASES / "baseline_slower__a8w8_tuned_gemm.csv")], db_path=str(kb))
    assert rules_of(r) == Counter({"baseline-slower": 1})
    f = next(f for f in r.findings if f.rule == "baseline-slower")
    # warm fp8 baseline (8.4 us), not the cold one nor the bf16 one: 8.4 / 10.5 = 0.80x
    assert (
        f.evidence["ratio"] == 0.8
        and f.evidence["baseline"]["candidate"] == "torch._scaled_mm"
        and "0.80x" in f.message
    )
    r = audit(str(MINI), [str(CASES / "baseline_missing__a8w8_tuned_gemm.csv")], db_path=str(kb))
    assert rules_of(r) == Counter({"baseline-missing": 1})
    f = next(f for f in r.findings if f.rule == "baseline-missing")
    assert f.severity == "note" and f.evidence["count"] == 1


def test_tile_gated(kb):
    r = audit(str(MINI), [str(CASES / "tile_gated__a8w8_tuned_gemm.csv")], db_path=str(kb))
    assert rules_of(r) == Counter({"tile-gated": 1, "baseline-missing": 1})
    f = next(f for f in r.findings if f.rule == "tile-gated")
    assert f.evidence["gate"]["line"] == 28 and "gfx950" in f.message
    # the same tile on gfx942 is available: no finding
    r = audit(str(MINI), [str(CASES / "clean__a8w8_tuned_gemm.csv")], db_path=str(kb))
    assert [x.line for x in r.findings if x.rule == "tile-gated"] == [4]


def test_without_kb_the_rules_are_reported_skipped(tmp_path):
    r = audit(str(MINI), [str(CASES / "baseline_slower__a8w8_tuned_gemm.csv")])
    assert rules_of(r, keep_skipped=True) == Counter({"rules-skipped": 1})
    assert r.skipped[0]["rules"] == ["baseline-slower", "baseline-missing", "tile-gated"]
    r = audit(
        str(MINI),
        [str(CASES / "baseline_slower__a8w8_tuned_gemm.csv")],
        db_path=str(tmp_path / "nope.db"),
    )
    assert "knowledge base not found" in r.skipped[0]["reason"]


# ---------------------------------------------------------------- CLI contract


def test_cli_exit_codes_and_formats():
    run = CliRunner().invoke
    clean = str(CASES / "clean__a8w8_tuned_gemm.csv")
    warn = str(CASES / "err_ratio_high__a8w8_tuned_gemm.csv")
    assert run(main, ["audit", "--aiter", str(MINI), clean]).exit_code == 0
    assert run(main, ["audit", "--aiter", str(MINI), warn]).exit_code == 0
    r = run(main, ["audit", "--aiter", str(MINI), "--fail-on", "warning", warn])
    assert r.exit_code == 1 and "[err-ratio-high]" in r.output and ":2: warning:" in r.output
    r = run(
        main,
        [
            "audit",
            "--aiter",
            str(MINI),
            "--format",
            "json",
            str(CASES / "us_invalid__a8w8_tuned_gemm.csv"),
        ],
    )
    assert r.exit_code == 1
    out = json.loads(r.output)
    assert out["summary"] == {"error": 1, "warning": 0, "note": 1}
    assert {k for k in out["findings"][0]} == {
        "rule",
        "severity",
        "file",
        "line",
        "op",
        "message",
        "evidence",
    }
    r = run(main, ["audit", "--aiter", str(MINI), "--arch", "gfx999", clean])
    assert r.exit_code == 2 and "unknown arch" in r.output
    r = run(main, ["audit", "--aiter", str(MINI / "nope")])
    assert r.exit_code == 2 and "aiter tree not found" in r.output and "Traceback" not in r.output


def test_a_file_named_after_no_op_is_said_not_silently_passed(tmp_path):
    p = tmp_path / "mystery.csv"
    p.write_bytes((CASES / "kernel_id_unknown__a8w8_tuned_gemm.csv").read_bytes())
    r = audit(str(MINI), [str(p)])
    assert rules_of(r) == Counter(
        {"op-unknown": 1}
    )  # the unknown kernelId cannot be checked without an op...
    assert (
        r.files[0]["kernel_checked"] == 0 and r.files[0]["no_kernel_list"] == 1
    )  # ...and the count says so


def test_ck_index_keeps_the_first_available_evidence_and_reuses_matches():
    from types import SimpleNamespace as NS

    from ckkb.audit.rules_kb import CkIndex

    tile = {
        "block_size": 256,
        "tile_m": 128,
        "tile_n": 128,
        "tile_k": 64,
        "mfma_m": 32,
        "mfma_n": 32,
    }
    inst = [
        NS(
            id=i,
            list_id=i,
            list_name=f"l{i}",
            file="f.cpp",
            line=i,
            template="DeviceGemm_Xdl_CShuffleV3",
            a_dtype="ck::f8_t",
            pipeline=None,
            scheduler=None,
            status="active",
            **tile,
        )
        for i in (1, 2)
    ]
    regs = [NS(id=10, list_id=1), NS(id=20, list_id=2)]
    av = [
        NS(
            registration_id=10,
            arch="gfx90a",
            available=False,
            layer="cmake",
            file="a",
            line=1,
            condition="c1",
        ),
        NS(
            registration_id=10,
            arch="gfx90a",
            available=True,
            layer="gate",
            file="b",
            line=2,
            condition="c2",
        ),
        NS(
            registration_id=20,
            arch="gfx90a",
            available=False,
            layer="cmake",
            file="c",
            line=3,
            condition="c3",
        ),
        NS(
            registration_id=20,
            arch="gfx90a",
            available=False,
            layer="gate",
            file="d",
            line=4,
            condition="c4",
        ),
        NS(
            registration_id=99,
            arch="gfx90a",
            available=True,
            layer="x",
            file="e",
            line=5,
            condition="c5",
        ),
    ]
    idx = CkIndex.from_rows(inst, regs, av)
    assert idx.avail == {
        (1, "gfx90a"): {
            "available": True,
            "layer": "gate",
            "file": "b",
            "line": 2,
            "condition": "c2",
        },
        (2, "gfx90a"): {
            "available": False,
            "layer": "cmake",
            "file": "c",
            "line": 3,
            "condition": "c3",
        },
    }
    kernel = NS(pipeline=None, scheduler=None, **tile)
    assert idx.gated(kernel, "gemm_a8w8", "gfx90a")[1] is None  # list 1 is available there
    idx.avail[(1, "gfx942")] = {**idx.avail[(2, "gfx90a")]}
    matches, evid = idx.gated(
        kernel, "gemm_a8w8", "gfx942"
    )  # from the memo; only list 1 says anything on gfx942
    assert (
        [m["id"] for m in matches] == [1, 2] and evid["instance"]["id"] == 1 and evid["file"] == "c"
    )
    matches.clear()  # callers get their own list
    assert len(idx.gated(kernel, "gemm_a8w8", "gfx942")[0]) == 2
    assert idx.gated(kernel, "gemm_unknown_dtype", "gfx942") == ([], None)


def test_a_blank_cu_num_names_no_part():
    """An untuned file may leave cu_num blank (aiter 2026's untuned_grouped_fmoe.csv: the
    tuner fills it in on the GPU it runs on): such a row names no part, so it is not one of
    an unknown part (it was: part-unknown `16 rows with cu_num=None`)."""
    path = CASES / "blank_cu_num__a8w8_untuned_gemm.csv"
    r = audit(str(MINI), [str(path)])
    assert rules_of(r) == Counter()


def test_splitk_never_searched_only_where_the_tuner_reads_splitk(tmp_path):
    """aiter's MoE tuners inherit -k/--splitK from base_tuner.py but never read args.splitK
    (they search ksplit themselves, for fp8 per_1x128 only): an all-zero ksplit there says
    nothing about -k. tests/fixtures/aiter_2026_mini's MoE tuner reads no args.splitK (grep
    below); aiter_mini's a8w8 tuner reads it, so its all-zero splitK file is still reported."""
    tree = MINI.parent / "aiter_2026_mini"
    assert "args.splitK" not in (tree / "csrc/ck_gemm_moe/gemm_moe_tune.py").read_text()
    p = tmp_path / "m_tuned_fmoe.csv"
    p.write_text(
        "cu_num,token,model_dim,expert,doweight_stage1,ksplit,us,err1,err2\n"
        "304,16,7168,256,0,0,10.0,0.01,0.02\n"
        "304,32,7168,256,0,0,11.0,0.01,0.02\n"
    )
    r = audit(str(tree), [str(p)])
    assert "splitk-never-searched" not in rules_of(r)
    r = audit(str(MINI), [str(next(CASES.glob("splitk_never_searched__*.csv")))])
    assert rules_of(r) == Counter({"splitk-never-searched": 1})


def test_moe_kernel_names_without_an_id_are_counted_not_skipped(tmp_path):
    """aiter's MoE configs name kernels in kernelName1/kernelName2 with no kernelId, and the
    MoE tuner builds its lists per call (get_gemm1_kernels_list(dtypes...)). Those rows were
    skipped without a word; now each named kernel (not an assembly `_Z` symbol, not Null) is
    counted and the op gets one kernel-list-unresolved error with the reason. By hand: 3 names
    below (row 2: stage 2 only, row 3: both stages)."""
    import shutil

    tree = tmp_path / "aiter"
    shutil.copytree(MINI.parent / "aiter_2026_mini", tree)
    moe = tree / "csrc" / "ck_gemm_moe"
    (moe / "gemm_moe_m_common.py").write_text(
        "from dataclasses import dataclass\n\n\n@dataclass\nclass K:\n    M: int\n\n"
        "    @property\n    def name(self):\n        return f'moe_m_{self.M}'\n\n\n"
        "gemm1_list = {0: K(16)}\n\n\n"
        "def get_gemm1_kernels_list(a, b):\n    return gemm1_list\n"
    )
    tuner = moe / "gemm_moe_tune.py"
    tuner.write_text(
        tuner.read_text().replace(
            "from aiter.utility.base_tuner import TunerCommon\n",
            "from aiter.utility.base_tuner import TunerCommon\n"
            "from gemm_moe_m_common import get_gemm1_kernels_list\n",
        )
    )
    (tree / "aiter/configs/tuned_fmoe.csv").write_text(
        "cu_num,token,model_dim,expert,doweight_stage1,us,kernelName1,err1,kernelName2,err2\n"
        "304,16,7168,256,0,10.0,_ZN5aiter3fooE,0.0,moe_m_16,0.0\n"
        "304,32,7168,256,0,10.0,moe_m_16,0.0,flydsl_moe2_x,0.0\n"
    )
    r = audit(str(tree))
    got = [f for f in r.findings if f.rule == "kernel-list-unresolved" and f.op == "fmoe"]
    assert [(f.op, f.evidence["rows"]) for f in got] == [("fmoe", 3)]
    assert "get_gemm1_kernels_list" in got[0].message
    assert sum(f["no_kernel_list"] for f in r.files if "fmoe" in f["file"]) == 3


MOE = MINI.parent / "aiter_2026_moe"


def test_moe_rows_checked_against_what_the_getters_build_for_them():
    """tests/fixtures/aiter_2026_moe is hand-written in the shape of aiter 2026-08's MoE tuner
    and gemm_moe_ck2stages_common.py. Worked out by hand from the files: cu_num 304 is gfx942
    (fp8 = float8_e4m3fnuz, list a8w8: 256x16, 256x32), 256 is gfx950 (fp8 = float8_e4m3fn,
    list a8w8_gfx950: 256x32, 256x64); per_Token is 2 in aiter_enum.h; gemm2 (256x16, 128x64)
    gets MulRoutedWeight = not doweight_stage1. Row 4's 256x64 exists only on gfx950: stale.
    Row 6 (gfx950) has a fnuz q_dtype_a, which dtype2str_dict has no key for on gfx950: its 2
    names are not checked, with that reason. Row 3's FlyDSL name is not a CK one."""
    r = audit(str(MOE))
    got = {(f.rule, f.line) for f in r.findings if f.rule.startswith("kernel-")}
    assert got == {
        ("kernel-name-stale", 4),
        ("kernel-list-unresolved", 0),
        # GEMM1's name reads ACT_OP_NAME, a module name (ckkb.extract.aiter_name_env): named;
        # GEMM2's reads self.Adtype, which only the getters set: not named
        ("kernel-list-unsupported", 55),
    }
    f = next(f for f in r.findings if f.rule == "kernel-list-unresolved")
    assert f.evidence["rows"] == 2 and "KeyError" in f.message and f.op == "fmoe"
    st = next(x for x in r.files if x["file"].endswith("tuned_fmoe.csv"))
    # not_ck: row 3's FlyDSL name and row 5's assembly name (_Z...), each counted
    assert (st["kernel_checked"], st["not_ck"], st["no_kernel_list"]) == (6, 2, 2)


GETTERS = "csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py"


def test_moe_rows_feed_the_kernel_usage_view(tmp_path):
    """Each MoE name checked is counted on the literal entry the getter copied it from."""
    from ckkb import pipeline, sources
    from ckkb.kb.build import build

    db_path = tmp_path / "kb.db"
    build(db_path, {"aiter": sources.aiter_tree(str(MOE))}, stages=pipeline.stages(), jobs=1)
    db = open_db(db_path, readonly=True)
    used = {
        (r["list_name"], r["kernel_id"]): r["tuned_rows"]
        for r in db.query("select * from aiter_kernel_usage where op = 'fmoe'")
    }
    db.close()
    # by hand: rows 2, 3 (gfx942) -> a8w8 ids 0, 1; row 5 (gfx950) -> a8w8_gfx950 id 1;
    # gemm2: row 2 -> id 3 (128x64), row 4 -> id 0 (256x16)
    assert used == {
        ("a8w8_gemm1_kernels_list", 0): 1,
        ("a8w8_gemm1_kernels_list", 1): 1,
        ("a8w8_gemm1_kernels_list_gfx950", 0): 0,
        ("a8w8_gemm1_kernels_list_gfx950", 1): 1,
        ("a8w8_gemm2_kernels_list", 0): 1,
        ("a8w8_gemm2_kernels_list", 3): 1,
        # row 4's kernelName1, which neither getter builds (kernel-name-stale): a checked
        # reference no entry holds, listed under the getters it was checked against
        (f"{GETTERS}:get_gemm1_kernels_list, {GETTERS}:get_gemm2_kernels_list", None): 1,
    }
