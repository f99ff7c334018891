"""FlyDSL rows checked against the lists the tuner races (issue 13, item 4): lists a module
builds with code at import time (its own get_gfx, math, a `try` import, torch.cuda inside
`try`, an lru_cache'd function), the tuple of pipelines getKernelName loops over, and a list a
method imports (gfx1250). The tree is aiter_2026_pick with the overlay
tests/fixtures/aiter_2026_flydsl (its README lists the files).

Worked out by hand from fly_common.py: on gfx950 kernels_list is _build over (16,64), (32,64),
(256,2048) for wpe 0, 1, 2, skipping wpe > int(512 / max(ceil(tm/16) * tn/64, 1)) (256x2048: 1):
{0: fly_16x64_0, 1: fly_32x64_0, 2: fly_256x2048_0, 3: fly_16x64_1, 4: fly_32x64_1,
5: fly_256x2048_1, 6: fly_16x64_2, 7: fly_32x64_2}; the 8-wave list, with no device the LDS is
163840 on gfx950: 256*(128+256) fits, 256*(256+512) does not: {1000000: fly8w_128x256}. The
gfx1250 list (LDS 327680): {0: flywmma_t16x256, 1: flywmma_t16x16384, 2: flywmma_t32x256}
(32*16384 is over). Each test failed before the change (the rows were unchecked: "not built
statically")."""

from __future__ import annotations

import pytest

from ckkb.audit.engine import audit
from ckkb.audit.list_eval import EvaluatedLists
from tests.overlays import overlay_tree

FLY = "aiter/ops/flydsl/gemm_tune/fly_common.py"
WMMA = "aiter/ops/flydsl/gemm_tune/fly_wmma_common.py"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return overlay_tree(tmp_path_factory.mktemp("fly"), "aiter_2026_flydsl", base="aiter_2026_pick")


def test_lists_built_by_code_per_arch(tree):
    ev = EvaluatedLists(tree, None)
    assert ev.names(FLY, "kernels_list", "gfx950") == {
        0: "fly_16x64_0",
        1: "fly_32x64_0",
        2: "fly_256x2048_0",
        3: "fly_16x64_1",
        4: "fly_32x64_1",
        5: "fly_256x2048_1",
        6: "fly_16x64_2",
        7: "fly_32x64_2",
    }
    # gfx942: (16,64) and (256,2048) only
    assert list(ev.names(FLY, "kernels_list", "gfx942").values()) == [
        "fly_16x64_0",
        "fly_256x2048_0",
        "fly_16x64_1",
        "fly_256x2048_1",
        "fly_16x64_2",
    ]
    assert ev.names(FLY, "kernels_list_8wave", "gfx950") == {1_000_000: "fly8w_128x256"}
    assert ev.names(FLY, "kernels_list_8wave", "gfx942") == {}
    assert ev.names(WMMA, "kernels_list", "gfx1250") == {
        0: "flywmma_t16x256",
        1: "flywmma_t16x16384",
        2: "flywmma_t32x256",
    }


def test_flydsl_rows_checked_against_the_list_the_tuner_races(tree):
    r = audit(str(tree))
    st = next(x for x in r.files if x["file"].endswith("pick_tuned_gemm.csv"))
    # 7 pick rows (6 checked, 1 asm) and 8 FlyDSL rows, all checked now
    assert (st["kernel_checked"], st["not_ck"], st["no_kernel_list"]) == (14, 1, 0)
    got = {
        (f.rule, f.line)
        for f in r.findings
        if f.file.endswith("pick_tuned_gemm.csv") and f.rule.startswith("kernel-") and f.line > 8
    }
    # lines 2-8 are aiter_2026_pick's rows (test_aiter_kernel_choice.py). Lines 9, 10, 14 are
    # as built (gfx950 id 4, 8-wave id 1000000, gfx1250 WMMA id 2); line 11: fly_32x64_1 is
    # id 4; line 12: fly_256x2048_2 is built by no id (id 2 is fly_256x2048_0); line 13: no id
    # 9; line 15: flywmma_t32x256 is id 2; line 16: flywmma_t32x16384 is built by no id
    # (32x16384 is over the LDS)
    assert got == {
        ("kernel-id-name-mismatch", 11),
        ("kernel-name-stale", 12),
        ("kernel-id-unknown", 13),
        ("kernel-id-name-mismatch", 15),
        ("kernel-name-stale", 16),
    }
    stale = next(f for f in r.findings if f.rule == "kernel-name-stale" and f.line == 12)
    assert stale.evidence["list_name"] == "fly_256x2048_0"
    assert stale.evidence["kernel_file"] == FLY
    wmma = next(f for f in r.findings if f.rule == "kernel-id-name-mismatch" and f.line == 15)
    assert wmma.evidence["name_id"] == 2 and wmma.evidence["kernel_file"] == WMMA
    assert not any(f.rule == "kernel-list-unresolved" for f in r.findings)


def _usage(tmp_path, tree) -> tuple[dict, int]:
    from ckkb import pipeline, sources
    from ckkb.kb.build import build
    from ckkb.kb.db import open_db

    db_path = tmp_path / "kb.db"
    build(db_path, {"aiter": sources.aiter_tree(str(tree))}, stages=pipeline.stages(), jobs=1)
    db = open_db(db_path, readonly=True)
    got = {
        (r["op"], r["file"], r["list_name"], r["kernel_id"], r["name"]): r["tuned_rows"]
        for r in db.query("select * from aiter_kernel_usage where tuned_rows > 0")
    }
    n = next(db.query("select count(*) n from aiter_row_kernels where status = 'checked'"))["n"]
    db.close()
    return got, n


@pytest.mark.parametrize("fixture", ["aiter_2026_opus", "aiter_2026_flydsl"])
def test_kernel_usage_view_adds_up_to_every_checked_reference(tmp_path, tree, fixture):
    """aiter_kernel_usage counted only entries of stored lists: the opus and FlyDSL references,
    checked against lists the audit builds, were in aiter_row_kernels and in no view row."""
    root = (
        tree
        if fixture == "aiter_2026_flydsl"
        else overlay_tree(tmp_path / "t", fixture, base="aiter_2026_pick")
    )
    got, checked = _usage(tmp_path, root)
    assert sum(got.values()) == checked
    if fixture == "aiter_2026_opus":
        # bf16_tuned_gemm.csv: solidx 4, 5004, 5 (stale: the row's name) and 99 (unknown); the
        # blockscale tuner's libtype-opus row, kernelId 11000 (pick_bpreshuffle_tuned_gemm.csv
        # line 5; line 6's name no list gives 11000: not_ck)
        opus = {
            k[3]: (k[4], n) for k, n in got.items() if k[1] == "csrc/opus_gemm/opus_gemm_common.py"
        }
        assert opus == {
            4: ("opus_gemm_256x128x256_fp32_t", 1),
            5004: ("opus_gemm_256x128x256_fp32_t_4g_safe", 1),
            5: ("opus_gemm_256x64x64_fp32_t", 1),
            99: ("opus_gemm_256x32x32_fp32_t", 1),
            11000: ("opus_gemm_gfx942_a8w8_512x128x128_fp32_t", 1),
        }
        return
    fly = {(k[2], k[3], k[4]): n for k, n in got.items() if k[1] in (FLY, WMMA)}
    # the 8 FlyDSL rows of pick_tuned_gemm.csv (lines 9-16), each under the list it was checked
    # against and the name it writes
    assert fly == {
        ("kernels_list", 4, "fly_32x64_1"): 1,
        ("kernels_list_8wave", 1_000_000, "fly8w_128x256"): 1,
        ("kernels_list", 3, "fly_32x64_1"): 1,
        ("kernels_list", 2, "fly_256x2048_2"): 1,
        ("kernels_list", 9, "fly_16x64_5"): 1,
        ("kernels_list", 2, "flywmma_t32x256"): 1,
        ("kernels_list", 0, "flywmma_t32x256"): 1,
        ("kernels_list", 1, "flywmma_t32x16384"): 1,
    }


def test_audit_with_a_knowledge_base_passes_flydsl_rows_by_the_ck_gate_rule(
    tmp_path, tree, monkeypatch
):
    """With a knowledge base the tile-gated rule reads each checked row's kernel as a CK one;
    a FlyDSL entry has no CK tile (it raised AttributeError on `ckkb audit --db` on aiter
    2026-08). gemm_pick has no dtype family, so the rule would stop before the tiles: it is
    given gemm_a8w8's, as aiter 2026's gemm_a8w8_bpreshuffle has."""
    from ckkb import pipeline, sources
    from ckkb.audit import rules_kb
    from ckkb.kb.build import build
    from tests.overlays import FIXTURES

    db = tmp_path / "kb.db"
    trees = {
        "ck": sources.ck_tree(str(FIXTURES / "ck_mini")),
        "aiter": sources.aiter_tree(str(tree)),
    }
    build(db, trees, stages=pipeline.stages(), jobs=1)
    a8w8 = rules_kb.dtype_hints("gemm_a8w8")
    monkeypatch.setattr(rules_kb, "dtype_hints", lambda op: a8w8)
    r = audit(str(tree), db_path=str(db))
    st = next(x for x in r.files if x["file"].endswith("pick_tuned_gemm.csv"))
    assert (st["kernel_checked"], st["not_ck"], st["no_kernel_list"]) == (14, 1, 0)
