"""`ckkb gates / instances / why / pool` and ckkb.queries.ck on a knowledge base of ck_mini."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest
from click.testing import CliRunner

from ckkb import pipeline
from ckkb.archs import ARCHS
from ckkb.cli import main
from ckkb.errors import CkkbError, SourceNotFound
from ckkb.kb import build as kbbuild
from ckkb.kb.build import run as build_run
from ckkb.kb.db import open_db
from ckkb.queries import ck as q
from ckkb.queries import sql
from ckkb.sources import ck_tree
from tests.conftest import FIXTURES

GPU = "library/src/tensor_operation_instance/gpu"
UNI = f"{GPU}/gemm_universal/device_gemm_xdl_universal_bf16_bf16_bf16"
P = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckq") / "kb.db"
    kbbuild.build(path, {"ck": ck_tree(FIXTURES / "ck_mini")}, stages=pipeline.stages(), jobs=1)
    return path


def run(kb, *args):
    r = CliRunner().invoke(main, [*args, "--db", str(kb)])
    return r


# ---------------------------------------------------------------- gates


def test_gates_json_contract(kb):
    r = run(kb, "gates", "--json", "--kind", "device_name")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert list(data) == ["gates"]
    assert all(
        list(g) == ["kind", "arch", "effect", "dir", "file", "line", "condition", "has_else"]
        for g in data["gates"]
    )
    got = sorted(
        (g["dir"], g["effect"], g["arch"], g["has_else"], g["line"]) for g in data["gates"]
    )
    assert got == [
        ("gemm_mx", "only", "gfx950", False, 12),
        ("gemm_universal", "exclude", "gfx950", False, 19),
        ("gemm_universal", "only", "gfx950", True, 16),
    ]
    assert q.gates(open_db(kb), "device_name", "gfx942") == {"gates": []}


def test_gates_human_table(kb):
    r = run(kb, "gates")
    assert r.exit_code == 0
    lines = [ln for ln in r.output.splitlines() if "gemm_universal" in ln or "total" in ln]
    assert [c.strip() for c in lines[0].split("│")[1:-1]] == [
        "gemm_universal",
        "1",
        "1",
        "1",
        "3",
        "6",
    ]
    assert [c.strip() for c in lines[1].split("│")[1:-1]] == ["total", "1", "2", "1", "3", "7"]


def test_gate_census_sql_is_the_canned_file(kb):
    rows = q.gate_census(open_db(kb), "device_name")
    assert {(r["dir"], r["effect"], r["gates"]) for r in rows} == {
        ("gemm_mx", "only", 1),
        ("gemm_universal", "exclude", 1),
        ("gemm_universal", "only", 1),
    }
    assert sql("gate_census").startswith("-- title:")


# ---------------------------------------------------------------- instances


def test_instances_json_contract_and_statuses(kb):
    r = run(kb, "instances", "--dir", "gemm_universal", "--arch", "gfx950", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["arch"] == "gfx950"
    keys = [
        "template",
        "dir",
        "file",
        "line",
        "list",
        "list_comment",
        "status",
        "fields",
        "registrations",
        "available",
    ]
    assert all(list(i) == keys for i in data["instances"])
    assert all(
        list(g) == ["function", "file", "line", "args", "available"]
        for i in data["instances"]
        for g in i["registrations"]
    )
    by_tile = {
        (i["fields"]["MPerBlock"], i["fields"]["NPerBlock"], i["fields"]["KPerBlock"], i["list"]): i
        for i in data["instances"]
    }
    part2 = by_tile[(256, 224, 64, f"{P}_comp_instances_part2")]
    assert (
        part2["available"] is False and part2["list_comment"] == "instances not working on gfx950"
    )
    assert [
        (g["file"].rsplit("_", 2)[-2], g["line"], g["args"], g["available"])
        for g in part2["registrations"]
    ] == [("default", 21, ["GemmDefault"], False), ("kpadding", 24, ["GemmKPadding"], False)]
    spill = [i for i in data["instances"] if i["status"] == "commented_out"]
    assert len(spill) == 1 and spill[0]["available"] is False
    comp = by_tile[(128, 128, 64, f"{P}_comp_instances")]
    assert comp["available"] is True


def test_unregistered_status(kb):
    res = q.instances(open_db(kb), dir="gemm_xdl_legacy")
    assert res["instances"] and {i["status"] for i in res["instances"]} == {"unregistered"}
    assert res["arch"] is None and all(i["available"] is None for i in res["instances"])


def test_instances_where_filters(kb):
    db = open_db(kb)
    res = q.instances(db, where=["MPerBlock=256", "BlkGemmPipelineVer=v3"], arch="gfx942")
    assert res["instances"] and all(i["fields"]["MPerBlock"] == 256 for i in res["instances"])
    assert all(i["fields"]["BlkGemmPipelineVer"].endswith("v3") for i in res["instances"])
    assert len(q.instances(db, where=["tile_m=256"])["instances"]) == len(
        q.instances(db, where=["MPerBlock=256"])["instances"]
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["instances", "--where", "Nope=1"], "unknown field 'Nope'"),
        (["instances", "--where", "MPerBlock"], "bad filter"),
        (["instances", "--arch", "gfx1234"], "unknown arch 'gfx1234'"),
        (["why", "--tile", "256x224", "--arch", "gfx950"], "bad --tile"),
        (["why", "--tile", "axbxc", "--arch", "gfx950"], "bad --tile"),
        (["why", "--tile", "256x224x64"], "--arch is required"),
        (["why", "--tile", "256x224x64", "--arch", "gfx9000"], "unknown arch"),
        (["why", "Bogus=3", "--arch", "gfx950"], "unknown field 'Bogus'"),
        (["gates", "--arch", "sm_90"], "unknown arch"),
    ],
)
def test_bad_query_input_is_one_line_exit_2(kb, args, message):
    r = run(kb, *args)
    assert r.exit_code == 2
    assert message in r.output
    assert "Traceback" not in r.output
    assert r.output.count("error:") == 1


def test_missing_database_is_a_clear_error(tmp_path):
    r = CliRunner().invoke(main, ["gates", "--db", str(tmp_path / "none.db")])
    assert (
        r.exit_code == 2 and "knowledge base not found" in r.output and "Traceback" not in r.output
    )


# ---------------------------------------------------------------- why


def test_why_part2_tile(kb):
    db = open_db(kb)
    res = q.why(db, "256x224x64", arch="gfx950")
    assert list(res) == ["arch", "query", "matches"]
    assert res["query"]["tile"] == "256x224x64"
    (m,) = res["matches"]
    assert m["available"] is False and m["instance"]["list"] == f"{P}_comp_instances_part2"
    assert [(r["layer"], r["file"], r["line"], r["condition"]) for r in m["reasons"]] == [
        (
            "registration",
            f"{UNI}/{P}_comp_default_instance.cpp",
            19,
            'if(ck::get_device_name() != "gfx950")',
        ),
        (
            "registration",
            f"{UNI}/{P}_comp_kpadding_instance.cpp",
            16,
            'else of if("gfx950" == ck::get_device_name())',
        ),
    ]
    assert all(r["list_comment"] == "instances not working on gfx950" for r in m["reasons"])
    assert all(
        list(r) == ["layer", "file", "line", "condition", "list", "list_comment"]
        for r in m["reasons"]
    )
    ok = q.why(db, "256x224x64", arch="gfx942")["matches"][0]
    assert ok["available"] is True and ok["reasons"] == []
    built = q.why(db, "256x224x64", arch="gfx908")["matches"][0]
    assert {r["layer"] for r in built["reasons"]} == {"build"}
    assert built["reasons"][0]["file"] == f"{GPU}/CMakeLists.txt"


def test_why_commented_out_and_capability(kb):
    db = open_db(kb)
    spill = q.why(db, "256x256x32", arch="gfx942")["matches"]
    assert len(spill) == 1 and spill[0]["reasons"][0]["layer"] == "commented_out"
    assert spill[0]["reasons"][0]["condition"] == "AGPR Spill"
    # 64x64x64 Interwave comp entry: on gfx1200 only the unconditional call adds it
    (m,) = q.why(db, "64x64x64", arch="gfx1200")["matches"]
    assert m["available"] is True
    assert [g["available"] for g in m["instance"]["registrations"]] == [True, False, False, False]
    (m,) = q.why(db, "64x64x64", arch="gfx908")["matches"]
    assert {r["layer"] for r in m["reasons"]} == {"build"}


def test_why_cli_human_and_json(kb):
    r = run(kb, "why", "--tile", "256x224x64", "--arch", "gfx950")
    assert r.exit_code == 0
    out = " ".join(r.output.split())
    assert "NOT available on gfx950" in out
    assert (
        f"{P}_comp_default_instance.cpp:19" in out
        and 'if(ck::get_device_name() != "gfx950")' in out
    )
    assert '"instances not working on gfx950"' in out
    r = run(kb, "why", "--tile", "256x224x64", "--arch", "gfx942", "--json")
    assert json.loads(r.output)["matches"][0]["available"] is True


def test_why_nothing_matches_shows_nearest(kb):
    res = q.why(open_db(kb), "256x240x64", arch="gfx950")
    assert res["matches"] == []
    assert res["nearest"][0]["tile"] == "256x224x64"
    r = run(kb, "why", "--tile", "256x240x64", "--arch", "gfx950")
    assert (
        r.exit_code == 0
        and "No instance matches tile 256x240x64" in r.output
        and "256x224x64" in r.output
    )


def test_why_missing_canned_query_matches(kb):
    rows = list(open_db(kb).query(sql("why_missing"), {"tile": "256x224x64", "arch": "gfx950"}))
    assert {(r["layer"], r["evidence_line"]) for r in rows} == {
        ("registration", 19),
        ("registration", 16),
    }


# ---------------------------------------------------------------- pool


EXPECTED_POOL = {  # mk_nk pairs; see ck_mini: comp 3, part2 3 active, mem 2
    "gfx908": 0,  # the fixture's CMake drops _xdl sources for gfx908
    "gfx90a": 18,
    "gfx942": 18,  # comp 3 (always) + 3 (capability) ; part2 3+3 ; mem 2*3
    "gfx950": 15,  # comp 3+3 (== gfx950 branch)+3 ; no part2 ; mem 6
    "gfx1100": 15,
    "gfx1101": 15,
    "gfx1200": 15,
    "gfx1201": 15,  # capability call false
}


def test_pool_counts(kb):
    res = q.pool_counts(open_db(kb), "gemm_universal", "bf16")
    assert res["layouts"] == ["mk_kn", "mk_nk", "km_kn", "km_nk"]
    assert {a: res["counts"][a]["mk_nk"] for a in ARCHS} == EXPECTED_POOL
    assert all(res["counts"][a][lay] == 0 for a in ARCHS for lay in ("mk_kn", "km_kn", "km_nk"))
    assert q.pool_counts(open_db(kb), "gemm_universal", "f16")["counts"]["gfx942"]["mk_nk"] == 0
    r = run(kb, "pool", "--json")
    assert json.loads(r.output)["counts"]["gfx950"]["mk_nk"] == 15
    r = run(kb, "pool")
    assert r.exit_code == 0 and "gfx950" in r.output and "15" in r.output


def test_pool_and_arch_diff_canned(kb):
    db = open_db(kb)
    rows = q.pool(db, "gemm_universal", "gfx950")
    assert rows and all(r["gfx950"] > 0 for r in rows)
    assert not [r for r in rows if r["tile_m"] == 256 and r["tile_n"] == 224]
    diff = q.arch_diff(db, "gfx942", "gfx950")
    part2 = [d for d in diff if d["list_name"].endswith("part2")]
    assert len(part2) == 3 and {d["present_on"] for d in part2} == {"gfx942"}
    assert all(d["evidence"].startswith("registration ") for d in part2)


# ---------------------------------------------------------------- bad input to the build


def test_missing_path_and_not_a_ck_tree(tmp_path):
    with pytest.raises(SourceNotFound, match="not found"):
        ck_tree(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceNotFound, match="is not a CK tree"):
        ck_tree(tmp_path / "empty")
    r = CliRunner().invoke(
        main,
        ["build", "--no-aiter", "--ck", str(tmp_path / "empty"), "--db", str(tmp_path / "x.db")],
    )
    assert r.exit_code == 2 and "is not a CK tree" in r.output and "Traceback" not in r.output


def test_damaged_tree_still_extracts_the_rest(copy_tree, tmp_path):
    root = copy_tree("ck_mini")
    d = root / GPU / "gemm_universal" / "device_gemm_xdl_universal_bf16_bf16_bf16"
    # unbalanced braces
    (d / f"{P}_broken_instance.cpp").write_text(
        "void add_device_broken_instances(std::vector<std::unique_ptr<DeviceGemmV2<Row>>>& "
        "instances)\n{\n"
        "    add_device_operation_instances(instances, "
        'x_instances{});\n    if(ck::get_device_name() == "gfx950" {\n'
    )
    (d / f"{P}_junk_instance.cpp").write_bytes(b"\x7fELF\x00\x00" + os.urandom(2000))
    os.symlink("..", root / GPU / "gemm_universal" / "loop")  # a symlink loop inside gpu/
    db = tmp_path / "kb.db"
    s = kbbuild.build(db, {"ck": ck_tree(root)}, stages=pipeline.stages(), jobs=1)
    msgs = [str(x) for x in s.diagnostics]
    assert any(f"{P}_broken_instance.cpp:" in m and "malformed" in m for m in msgs)
    assert any(f"{P}_junk_instance.cpp" in m and "binary" in m for m in msgs)
    res = q.why(open_db(db), "256x224x64", arch="gfx950")
    assert res["matches"][0]["reasons"][0]["line"] == 19  # the rest still extracted
    regs = list(
        open_db(db).query(
            "SELECT list_name FROM registrations WHERE file LIKE '%broken_instance.cpp'"
        )
    )
    assert [r["list_name"] for r in regs][:1] == [
        "x_instances"
    ]  # the part before the damage is read


def test_failed_build_leaves_previous_database_intact(kb, tmp_path, monkeypatch):
    db = tmp_path / "kb.db"
    shutil.copy(kb, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_run, "insert_rows", boom)
    with pytest.raises(KeyboardInterrupt):
        kbbuild.build(
            db, {"ck": ck_tree(FIXTURES / "ck_mini")}, stages=pipeline.stages(), jobs=1, force=True
        )
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not list(tmp_path.glob("kb.db.tmp-*"))
    assert q.gates(open_db(db), "device_name")["gates"]
    with pytest.raises(CkkbError):
        q.why(open_db(db), "1x2", arch="gfx950")


def test_why_missing_joins_registrations_row_by_row(kb):
    """The registrations with an availability row on `arch` are looked up per instance, never
    materialised whole with an automatic index (10 ms on every run over the wheel's tree, for
    answers of a few rows); read from the plan SQLite chooses, served (scoped) and plain, for a
    tile and for any tile."""
    from ckkb.kb.trees import scoped_sql

    conn = open_db(kb, readonly=True).conn
    for text in (sql("why_missing"), scoped_sql(sql("why_missing"))):
        for tile in ("256x224x64", ""):
            params = {"tile": tile, "arch": "gfx950", "tree": ""}
            plan = [r[3] for r in conn.execute("explain query plan " + text, params)]
            assert not [p for p in plan if "AUTOMATIC" in p or "MATERIALIZE (join" in p], plan
