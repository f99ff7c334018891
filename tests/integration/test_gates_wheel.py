"""Acceptance on the installed wheel's CK tree: gates, why and per-arch pool counts."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from ckkb.cli import main
from ckkb.kb.db import open_db
from ckkb.queries import ck as q

GPU = "library/src/tensor_operation_instance/gpu"
BF16 = "device_gemm_xdl_universal_bf16_bf16_bf16"
PART2 = f"{BF16}_mk_nk_mn_comp_instances_part2"


@pytest.fixture(scope="module")
def db(wheel_db):
    return open_db(wheel_db, readonly=True)


def test_device_name_gates_match_the_seed(wheel_db):
    r = CliRunner().invoke(main, ["gates", "--json", "--db", str(wheel_db)])
    assert r.exit_code == 0, r.output
    gates = [g for g in json.loads(r.output)["gates"] if g["kind"] == "device_name"]
    assert len(gates) == 166
    assert Counter(g["effect"] for g in gates) == {"exclude": 87, "only": 79}
    assert {g["arch"] for g in gates} == {"gfx950"}
    per = Counter((g["dir"], g["effect"]) for g in gates)
    expected = {
        "gemm_universal": (45, 6),
        "gemm_universal_streamk": (10, 0),
        "gemm_universal_reduce": (8, 4),
        "batched_gemm": (0, 4),
        "grouped_gemm_tile_loop": (0, 4),
        "gemm_fastgelu": (0, 4),
        "gemm_add_fastgelu": (0, 4),
        "gemm_add_add_fastgelu": (0, 4),
    }
    for d, (exclude, only) in expected.items():
        assert (per[(d, "exclude")], per[(d, "only")]) == (exclude, only), d
    # every gate names its file and line, relative to the CK root
    assert all(g["file"].startswith(GPU + "/") and g["line"] > 0 for g in gates)


def test_why_part2_tile_on_gfx950_and_gfx942(db):
    res = q.why(db, "256x224x64", [f"list_name={PART2}"], arch="gfx950")
    (m,) = res["matches"]
    assert m["available"] is False
    assert m["instance"]["list_comment"] == "instances not working on gfx950"
    files = {(r["layer"], r["file"].rsplit("/", 1)[-1], r["condition"]) for r in m["reasons"]}
    assert (
        "registration",
        f"{BF16}_mk_nk_mn_comp_default_instance.cpp",
        'if(ck::get_device_name() != "gfx950")',
    ) in files
    default = next(r for r in m["reasons"] if r["file"].endswith("_comp_default_instance.cpp"))
    assert default["line"] == 20 and default["list_comment"] == "instances not working on gfx950"
    ok = q.why(db, "256x224x64", [f"list_name={PART2}"], arch="gfx942")["matches"][0]
    assert ok["available"] is True and ok["reasons"] == []


def test_why_cli_on_the_wheel(wheel_db):
    r = CliRunner().invoke(
        main,
        [
            "why",
            "--tile",
            "256x224x64",
            f"list_name={PART2}",
            "--arch",
            "gfx950",
            "--db",
            str(wheel_db),
        ],
    )
    assert r.exit_code == 0
    out = " ".join(r.output.split())
    assert f"{BF16}_mk_nk_mn_comp_default_instance.cpp:20" in out
    assert '"instances not working on gfx950"' in out


# Available (instance, registering call) pairs for gemm_universal with A/B/C all bf16, per layout.
# Checked against the source: the XDL bf16 lists are built for every gfx9 part and, by CK's CMake,
# for gfx11/gfx12 too (the `_xdl` rule only drops gfx900/906/1030) and no capability check guards
# their add functions; the WMMA bf16 lists are built for gfx11/gfx12 only. In mk_nk the XDL lists
# are comp 6 entries x 2 calls + comp_part2 5 x 2 + mem 14 x 4 + mem_part2 2 x 4 = 86; on gfx950
# the `!= "gfx950"` gates drop both part2 lists (10 + 8) = 68. mk_kn: 7x4 + 3x4 + 12x6 + 2x6 = 124,
# gfx950 124 - 24 = 100; km_kn has no part2 list (10x4 + 16x6 = 136 everywhere); km_nk:
# 13x4 + 3x4 + 16x6 + 1x6 = 166, gfx950 166 - 18 = 148.
POOL = {
    "gfx908": {"mk_kn": 124, "mk_nk": 86, "km_kn": 136, "km_nk": 166},
    "gfx90a": {"mk_kn": 124, "mk_nk": 86, "km_kn": 136, "km_nk": 166},
    "gfx942": {"mk_kn": 124, "mk_nk": 86, "km_kn": 136, "km_nk": 166},
    "gfx950": {"mk_kn": 100, "mk_nk": 68, "km_kn": 136, "km_nk": 148},
    "gfx1100": {"mk_kn": 180, "mk_nk": 154, "km_kn": 172, "km_nk": 210},
    "gfx1101": {"mk_kn": 180, "mk_nk": 154, "km_kn": 172, "km_nk": 210},
    "gfx1200": {"mk_kn": 180, "mk_nk": 154, "km_kn": 172, "km_nk": 210},
    "gfx1201": {"mk_kn": 180, "mk_nk": 154, "km_kn": 172, "km_nk": 210},
}


def test_pool_counts_pinned(db):
    res = q.pool_counts(db, "gemm_universal", "bf16")
    # the eight archs pinned before issue 13; the tree's CMake also targets gfx1030 and gfx1102
    assert {a: res["counts"][a] for a in POOL} == POOL
    assert set(res["counts"]) == set(POOL) | {"gfx1030", "gfx1102"}


def test_pool_difference_is_the_gated_part2_lists(db):
    rows = list(
        db.query(
            "SELECT v.list_name, count(*) AS n FROM ck_instance_availability "
            "v JOIN ck_gemm_layouts g ON g.instance_id = v.instance_id "
            "JOIN instances i ON i.id = v.instance_id WHERE v.dir = "
            "'gemm_universal' AND i.a_dtype = 'bhalf_t' AND i.c_dtype = 'bhalf_t' "
            "AND i.b_dtype = 'bhalf_t' AND v.arch = 'gfx950' AND v.available "
            "= 0 AND v.layer = 'registration' GROUP BY v.list_name"
        )
    )
    lost = sum(r["n"] for r in rows)
    assert lost == sum(POOL["gfx942"].values()) - sum(POOL["gfx950"].values())
    assert all(r["list_name"].endswith("_part2") for r in rows)


def test_every_device_name_gate_guards_a_recorded_registration(db):
    orphans = list(
        db.query(
            "SELECT g.file, g.line FROM gates g WHERE g.kind = 'device_name' AND NOT EXISTS ("
            "SELECT 1 FROM registrations r, json_each(r.conditions) c "
            "WHERE r.file = g.file AND json_extract(c.value, '$.line') = g.line)"
        )
    )
    assert orphans == []


def test_build_rules_from_ck_cmake(db):
    rules = list(db.query("SELECT action, condition, line FROM build_rules"))
    assert any(
        r["action"] == "remove_source" and '"_mx"' in r["condition"] and "gfx950" in r["condition"]
        for r in rules
    )
    mx = list(
        db.query(
            "SELECT arch, built FROM file_builds WHERE file LIKE "
            "'%gemm_mx/%' AND file LIKE '%.cpp' GROUP BY arch"
        )
    )
    assert {r["arch"] for r in mx if r["built"]} == {"gfx950"}
