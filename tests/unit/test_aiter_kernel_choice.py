"""Kernel lists found the way aiter 2026's tuners and codegen find them (issue 13, item 4):
lists a module builds with code per arch (ckkb.extract.aiter_derived), a tuner's getKernelName
picking a list per row (ckkb.extract.aiter_tuner_choice), and the audit checking each row
against its own list. tests/fixtures/aiter_2026_pick is hand-written in the shape of aiter
2026-08's a8w8 blockscale tuner and cktile instance file; the expected ids and names below were
worked out by hand from those files (comments say how). Each test failed before the change."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb.audit.engine import audit
from ckkb.extract.aiter_kernels import read_kernel_file
from ckkb.extract.aiter_pyexec import arch_matches
from ckkb.extract.aiter_tuner_choice import read_choice
from ckkb.extract.aiter_tuner_reader import read_tuner

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "aiter_2026_pick"
CKTILE = "csrc/ck_gemm_pick/gemm_pick_cktile_instance.py"
TUNER = "csrc/ck_gemm_pick/gemm_pick_tune.py"
PICK = "aiter/configs/pick_tuned_gemm.csv"
PICK_BP = "aiter/configs/pick_bpreshuffle_tuned_gemm.csv"


def _kf(rel: str, text: str | None = None):
    data = text.encode() if text is not None else (TREE / rel).read_bytes()
    return read_kernel_file(rel, data)


def test_lists_built_by_code_per_arch():
    kf = _kf(CKTILE)
    derived = [kl for kl in kf.lists if kl.derived]
    assert [(kl.name, kl.line, kl.when) for kl in derived] == [
        ("candidate_kernels_cktile_dict", 67, [["startswith", "gfx95", True]]),
        ("candidate_kernels_cktile_dict", 67, [["startswith", "gfx95", False]]),
    ]
    # by hand (lines by grep): kernels_list_95x holds 16x128 bpc1, 32x128 bpc2, 192x256 bpc1
    # aqrm (ids 0-2); expand_blockpercu adds each tile's missing BlockPerCu (max 2) from id 3,
    # tiles in order
    gfx95 = {e.key: (e.name, e.line) for e in derived[0].entries}
    assert gfx95 == {
        0: ("pick_cktile_16x128_1", 60),
        1: ("pick_cktile_32x128_2", 61),
        2: ("pick_cktile_192x256_1_aqrm", 62),
        3: ("pick_cktile_16x128_2", 60),
        4: ("pick_cktile_32x128_1", 61),
        5: ("pick_cktile_192x256_2_aqrm", 62),
    }
    assert {e.key: e.name for e in derived[1].entries} == {
        0: "pick_cktile_128x128_1",
        1: "pick_cktile_128x128_2",
    }
    # the name property of several statements (after a docstring) is run, not reported
    assert kf.diagnostics == []
    # candidate_kernels_by_name is keyed by names, not kernel ids: not a kernel list
    assert "candidate_kernels_by_name" not in {kl.name for kl in kf.lists}


@pytest.mark.parametrize(
    "when, gfx, ok",
    [
        ([["startswith", "gfx95", True]], "gfx950", True),
        ([["startswith", "gfx95", True]], "gfx942", False),
        ([["startswith", "gfx95", False]], "gfx942", True),
        ([["eq", "gfx942", True]], "gfx942", True),
        ([["eq", "gfx942", False]], "gfx1250", True),
        ([], "gfx1250", True),
    ],
)
def test_arch_tests_evaluated_for_a_rows_gfx(when, gfx, ok):
    assert arch_matches(when, gfx) is ok


def test_what_cannot_be_built_is_reported_never_guessed():
    src = (
        "from dataclasses import dataclass\n"
        "from helpers import widen\n"  # a function ckkb does not read
        "\n"
        "@dataclass\n"
        "class K:\n"
        "    a: int\n"
        "\n"
        "base = {0: K(1)}\n"
        "wide = widen(base)\n"
        "n = 0\n"
        "while n < 3:\n"
        "    n += 1\n"
        "again = {**base}\n"
    )
    kf = _kf("csrc/ck_e/e_common.py", src)
    assert [kl.name for kl in kf.lists] == ["base", "again"]
    assert [(d.line, d.message) for d in kf.diagnostics] == [
        (9, "kernel list not built statically: name 'widen' is not known statically")
    ]


def test_a_loop_that_does_not_end_is_refused():
    """A loop too long for a static reading stops at the work budget; a range too long to
    build is refused before it is built."""
    src = (
        "from dataclasses import dataclass\n"
        "\n"
        "@dataclass\n"
        "class K:\n"
        "    a: int\n"
        "\n"
        "base = {0: K(1)}\n"
        "def grow(d):\n"
        "    out = dict(d)\n"
        "    for i in range(100000):\n"
        "        for j in range(100000):\n"
        "            out[j + 1] = d[0]\n"
        "    return out\n"
        "big = grow(base)\n"
    )
    kf = _kf("csrc/ck_e/e_common.py", src)
    assert [kl.name for kl in kf.lists] == ["base"]
    assert [d.message for d in kf.diagnostics] == [
        "kernel list not built statically: more work than a static evaluation runs"
    ]
    kf = _kf("csrc/ck_e/e_common.py", src.replace("range(100000)", "range(10000000)", 1))
    assert [d.message for d in kf.diagnostics] == [
        "kernel list not built statically: call failed: ValueError('range of 10000000 values')"
    ]


def test_tuner_choice_per_selector_value():
    data = (TREE / TUNER).read_bytes()
    tf, _ = read_tuner(TUNER, data)
    choice, problems = read_choice(data.decode(), tf.kernel_imports)
    assert problems == []
    assert choice is not None and choice["method_line"] == 30
    assert choice["params"] == [
        {"name": "libType", "default": "ck", "true_for_env": []},
        # run() switches config_env_name under `getattr(args, "preshuffle", False)`
        {
            "name": "preshuffleB",
            "default": False,
            "true_for_env": ["AITER_CONFIG_GEMM_PICK_BPRESHUFFLE"],
        },
    ]
    got = {
        (c["when"]["libType"], c["when"]["preshuffleB"]): c.get("name") or c.get("none")
        for c in choice["cases"]
    }
    assert got == {
        ("ck", False): "candidate_kernels_dict",
        ("ck", True): "kernels_list",
        ("cktile", False): "candidate_kernels_cktile_dict",
        ("cktile", True): "candidate_kernels_cktile_dict",
        ("*", False): True,  # asm, opus, ...: getKernelName returns None
        ("*", True): True,
    }


def test_each_row_checked_against_the_list_its_tuner_picks():
    r = audit(str(TREE), db_path="/nonexistent/ckkb.db")
    kernel = [
        (f.rule, f.file, f.line)
        for f in r.findings
        if f.rule.startswith("kernel") and f.rule != "kernel-duplicate"
    ]
    # by hand, pick_tuned_gemm.csv: line 5 names id 3 of the gfx95 list (kernelId 4); line 7's
    # id 3 is past the gfx942 list (ids 0-1); line 8 is ck (preshuffleB False) with a
    # preshuffle kernel's name. pick_bpreshuffle: line 4 names id 1 of the preshuffle list.
    assert sorted(kernel) == [
        ("kernel-id-name-mismatch", PICK_BP, 4),
        ("kernel-id-name-mismatch", PICK, 5),
        ("kernel-id-unknown", PICK, 7),
        ("kernel-name-stale", PICK, 8),
    ]
    files = {f["file"]: f for f in r.files}
    # every ck and cktile row checked; the asm row (getKernelName returns None) is not
    assert (files[PICK]["kernel_checked"], files[PICK]["not_ck"]) == (6, 1)
    assert files[PICK]["no_kernel_list"] == 0
    assert files[PICK_BP]["kernel_checked"] == 3


def test_rows_whose_chosen_list_is_missing_are_an_error_naming_op_and_reason(tmp_path):
    import shutil

    tree = tmp_path / "pick"
    shutil.copytree(TREE, tree)
    (tree / CKTILE).unlink()  # the cktile list the tuner imports is gone
    r = audit(str(tree), db_path="/nonexistent/ckkb.db")
    found = {f.op: f for f in r.findings if f.rule == "kernel-list-unresolved"}
    assert set(found) == {"gemm_pick", "gemm_pick_bpreshuffle"}  # both configs have cktile rows
    f = found["gemm_pick"]
    assert f.severity == "error" and found["gemm_pick_bpreshuffle"].evidence["rows"] == 1
    # the four cktile rows of pick_tuned_gemm.csv (lines 3, 4, 5, 7), with the tuner's reason
    assert f.evidence["rows"] == 4 and f.evidence["files"] == [PICK]
    assert "libType='cktile'" in f.message and "module file not found" in f.message
    files = {x["file"]: x for x in r.files}
    assert (files[PICK]["kernel_checked"], files[PICK]["no_kernel_list"]) == (2, 4)


def test_summary_names_the_lists_each_config_indexes():
    import json

    from click.testing import CliRunner

    from ckkb.cli import main

    out = CliRunner().invoke(main, ["aiter", "summary", "--aiter", str(TREE), "--json"])
    assert out.exit_code == 0, out.output
    ops = {o["op"]: o for o in json.loads(out.output)["ops"]}

    def lists(op: str) -> set[tuple[str, str]]:
        return {(b["file"], b["list"]) for b in ops[op]["kernel_lists_by_row"] if "file" in b}

    tile = (CKTILE, "candidate_kernels_cktile_dict")
    # preshuffleB is fixed by the config the tuner writes (--preshuffle: the BPRESHUFFLE one)
    assert lists("gemm_pick") == {
        ("csrc/ck_gemm_pick/gemm_pick_common.py", "candidate_kernels_dict"),
        tile,
    }
    assert lists("gemm_pick_bpreshuffle") == {
        ("csrc/ck_gemm_pick_bp/gemm_pick_bp_common.py", "kernels_list"),
        tile,
    }
    # ids: 2 (ck) + 6 and 2 (the cktile list's gfx95 and other values)
    assert ops["gemm_pick"]["kernel_ids"] == 10
    for b in ops["gemm_pick"]["kernel_lists_by_row"]:
        assert "file" not in b or (TREE / b["file"]).is_file()


_EXPAND_SRC = (TREE / CKTILE).read_text()
_BASE = _EXPAND_SRC[: _EXPAND_SRC.index("kernels_list_942 = {")]  # imports, class, expand function


@given(
    st.lists(
        st.tuples(st.sampled_from([16, 32]), st.sampled_from([64, 128]), st.integers(1, 3)),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 3),
)
@settings(max_examples=40, deadline=None)
def test_module_code_runs_as_python_would(entries, bpc_max):
    """expand_blockpercu run by ckkb.extract.aiter_pyexec against a second method: the expansion
    written out by hand in tests/integration/aiter_kernel_census.py (_expand)."""
    from tests.integration.aiter_kernel_census import _expand

    body = "".join(
        f"    {i}: TileKernelInstance({m}, {n}, {b}),\n" for i, (m, n, b) in enumerate(entries)
    )
    src = (
        _BASE.replace("BLOCK_PER_CU_MAX = 2", f"BLOCK_PER_CU_MAX = {bpc_max}")
        + f"base = {{\n{body}}}\n\nderived = expand_blockpercu(base)\n"
    )
    kf = _kf("csrc/ck_e/e_cktile_instance.py", src)
    (derived,) = [kl for kl in kf.lists if kl.derived]
    got = {e.key: e.values for e in derived.entries}
    fields = ("M_Tile", "N_Tile", "BlockPerCu")
    base = {
        i: dict(zip(fields, e, strict=True)) | {"AQRowMajor": False} for i, e in enumerate(entries)
    }
    assert got == _expand(base, bpc_max)
    assert derived.when == [] and kf.diagnostics == []


def test_kernel_usage_view_counts_rows_of_every_list_an_op_picks(tmp_path):
    """aiter_kernel_usage covers ops whose tuner picks a list per row (it joined only an op's
    one list, so gemm_pick had no rows at all), from the audit's own per-row resolution.
    Expected by hand from the two CSVs: libtype ck -> candidate_kernels_dict (preshuffleB
    False) or gemm_pick_bp's kernels_list (the --preshuffle config); cktile -> the gfx95 value of
    candidate_kernels_cktile_dict on gfx950, the other value on gfx942; asm rows index none;
    gfx942's cktile id 3 is in no value (ids 0, 1)."""
    from ckkb import pipeline, sources
    from ckkb.kb.build import build
    from ckkb.kb.db import open_db

    db_path = tmp_path / "kb.db"
    build(db_path, {"aiter": sources.aiter_tree(str(TREE))}, stages=pipeline.stages(), jobs=1)
    db = open_db(db_path, readonly=True)
    got = {
        (r["op"], r["list_name"], r["list_arch_when"], r["kernel_id"]): r["tuned_rows"]
        for r in db.query("select * from aiter_kernel_usage")
    }
    db.close()
    used = {k: n for k, n in got.items() if n}
    g95, g942 = '[["startswith", "gfx95", true]]', '[["startswith", "gfx95", false]]'
    tile = "candidate_kernels_cktile_dict"
    assert used == {
        ("gemm_pick", "candidate_kernels_dict", "[]", 0): 1,
        ("gemm_pick", "candidate_kernels_dict", "[]", 1): 1,
        ("gemm_pick", tile, g95, 4): 1,
        ("gemm_pick", tile, g95, 5): 1,
        ("gemm_pick", tile, g942, 1): 1,
        ("gemm_pick_bpreshuffle", "kernels_list", "[]", 0): 2,
        ("gemm_pick_bpreshuffle", tile, g95, 0): 1,
        # gfx942's cktile id 3, checked against the gfx942 value (kernel-id-unknown): the
        # view's row for a checked reference no stored entry holds (no list_arch_when)
        ("gemm_pick", tile, None, 3): 1,
    }
    # every entry of every list each op may index is listed, used or not: 2 + 6 + 2 per op
    # (gemm_pick_bp's kernels_list has 2 entries, as candidate_kernels_dict), and gemm_pick's
    # checked id 3 that no entry holds
    assert sum(1 for k in got if k[0] == "gemm_pick" and k[2] is not None) == 10
    assert sum(1 for k in got if k[0] == "gemm_pick") == 11
    assert sum(1 for k in got if k[0] == "gemm_pick_bpreshuffle") == 10
