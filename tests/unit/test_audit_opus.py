"""Every tuned row of an opus backend ends checked or unchecked with a named reason: the bf16
GEMM tuner's opus list, imported inside a `try` (solidx rows), and the opus rows a blockscale
tuner races from an imported list its getKernelName returns None for (kernelId rows).

tests/fixtures/aiter_2026_opus, an overlay of aiter_2026_pick (hand-written in the shape of
aiter 2026-08's gemm_a16w16_tune.py and opus_gemm_common.py). Worked out by hand from the files:
kernels_list = a16w16 {4: 256x128x256, 5: 256x64x128}, their 4 GiB-safe copies at 5004, 5005
(dataclasses.replace, name + `_4g_safe`), and gfx942_a8w8 {11000: 512x128x128}; output_dtypes
defaults to ["fp32_t"] (field(default_factory=...)).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ckkb.audit.engine import audit
from ckkb.extract.aiter_tuner_reader import read_tuner, read_tuner_module
from tests.overlays import FIXTURES, overlay_tree

OVERLAY = FIXTURES / "aiter_2026_opus"


@pytest.fixture(scope="module")
def opus(tmp_path_factory) -> Path:
    """aiter_2026_pick with the overlay aiter_2026_opus (its README lists the files)."""
    return overlay_tree(tmp_path_factory.mktemp("opus"), "aiter_2026_opus", base="aiter_2026_pick")


def _counts(r, name: str) -> tuple[int, int, int]:
    st = next(x for x in r.files if x["file"].endswith(name))
    return st["kernel_checked"], st["not_ck"], st["no_kernel_list"]


def test_bf16_opus_rows_checked_against_the_list_imported_in_a_try(opus):
    r = audit(str(opus))
    # rows 1, 2 (5004: a replace()d copy), 3 and 6 are opus names: checked; the asm (_Z) and
    # triton (`auto`) rows are other backends', counted not_ck with their libtype
    assert _counts(r, "bf16_tuned_gemm.csv") == (4, 2, 0)
    got = {(f.rule, f.line) for f in r.findings if f.file.endswith("bf16_tuned_gemm.csv")}
    # row 3 (line 4): solidx 5 is opus_gemm_256x64x128_fp32_t; row 6 (line 7): no id 99
    assert got == {("kernel-name-stale", 4), ("kernel-id-unknown", 7)}
    stale = next(f for f in r.findings if f.rule == "kernel-name-stale" and f.line == 4)
    assert stale.evidence["list_name"] == "opus_gemm_256x64x128_fp32_t"


def test_opus_rows_a_blockscale_tuner_races_are_checked_not_other_backends(opus):
    r = audit(str(opus))
    # line 5: libtype opus, kernelId 11000 in gfx942_a8w8_kernels_list (the tuner imports it;
    # getKernelName returns None for opus): checked. Line 6 names no kernel that list gives
    # 11000: not checked, with that reason
    assert _counts(r, "pick_bpreshuffle_tuned_gemm.csv") == (4, 1, 0)
    assert not any(f.rule == "kernel-list-unresolved" for f in r.findings)


def test_both_tuner_readers_read_imports_inside_a_try():
    rel = "csrc/gemm_a16w16/gemm_a16w16_tune.py"
    data = (OVERLAY / rel).read_bytes()
    fast, _ = read_tuner(rel, data)
    whole, _ = read_tuner_module(rel, data)
    for tf in (fast, whole):
        assert tf.kernel_imports == [("opus_gemm_common", "kernels_list")]
        assert tf.sys_paths == ["csrc/opus_gemm"]  # os.path.join(dirname(__file__), "..")


def test_an_op_with_no_tuner_is_an_error_naming_it_not_a_silent_skip(tmp_path, opus):
    import shutil

    tree = tmp_path / "t"
    shutil.copytree(opus, tree)
    (tree / "csrc/gemm_a16w16/gemm_a16w16_tune.py").unlink()
    r = audit(str(tree))
    f = next(f for f in r.findings if f.rule == "kernel-list-unresolved")
    assert f.op == "gemm_bf16" and f.severity == "error"
    assert "no tuner in this tree imports AITER_CONFIG_GEMM_BF16" in f.message
    # the 4 opus and the triton row cannot be checked; the asm row is an assembly kernel
    assert _counts(r, "bf16_tuned_gemm.csv") == (0, 1, 5)


MOE = FIXTURES / "aiter_2026_moe"


def _summary_ops(root: Path) -> dict:
    import json

    from click.testing import CliRunner

    from ckkb.cli import main

    out = CliRunner().invoke(main, ["aiter", "summary", "--aiter", str(root), "--json"])
    assert out.exit_code == 0, out.output
    return {o["op"]: o for o in json.loads(out.output)["ops"]}


def test_summary_note_says_what_each_op_resolved(tmp_path, monkeypatch, opus):
    monkeypatch.setenv("CKKB_DB", str(tmp_path / "none.db"))  # the tree itself, not a KB
    fmoe = _summary_ops(MOE)["fmoe"]
    # the MoE names are checked per row against what the getters build (the figures of
    # test_moe_rows_checked_against_what_the_getters_build_for_them): never "not read"
    assert fmoe["kernel_rows"] == {"checked": 6, "not_ck": 2, "no_kernel_list": 2}
    assert "not read statically" not in fmoe["kernel_list_note"]
    assert fmoe["kernel_list_note"].startswith(
        "6 checked (6 by what the list getters the tuner calls build for the row); 2 NOT checked: "
    )
    bf16 = _summary_ops(opus)["gemm_bf16"]
    assert bf16["kernel_rows"] == {"checked": 4, "not_ck": 2, "no_kernel_list": 0}
    assert bf16["kernel_list_note"].startswith("4 checked (4 by the op's kernel list); 2 not CK")


def test_an_arch_free_list_module_is_built_once_with_the_same_names(opus):
    """opus_gemm_common.py names no arch function, and run with an arch that raises when used
    it builds its lists: they are built once for every arch, the same as built for each arch.
    (A module that never names the arch but whose function imports one that does, as opus's
    `from aiter.jit.core import bd_dir`, is built once too when that function is not run.)"""
    from ckkb.audit.list_eval import EvaluatedLists

    f = "csrc/opus_gemm/opus_gemm_common.py"
    ev = EvaluatedLists(opus, opus / "aiter")
    assert ev.once(f, "kernels_list") is not None
    once = ev.names(f, "kernels_list", "gfx942")
    assert once == ev.names(f, "kernels_list", "gfx950") == ev._built(f, "kernels_list", "gfx950")
    assert isinstance(once, dict) and once[5004] == "opus_gemm_256x128x256_fp32_t_4g_safe"
