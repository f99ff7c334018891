"""Every canned query, the explain page and the charts over HTTP, on the knowledge base of the
installed wheel (plus ingested races and one harness bundle). Uses Datasette's own ASGI client."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import urlencode

import pytest
import sqlite_utils

from ckkb.kb.ingest import ingest
from ckkb.queries import names as name_queries
from ckkb.web import app
from ckkb.web.metadata import canned_queries
from tests.conftest import SAMPLES
from tests.fleet_bundles import harness_fleet_bundle

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "web"
FIXTURE_RACE = FIXTURES / "gemm_universal_bf16_race.txt"  # hand-written, gfx942
FIXTURE_RACE_950 = FIXTURES / "gemm_universal_bf16_race_gfx950.txt"  # same shape, another winner

PART2 = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances_part2"
GATE_CPP = (
    "library/src/tensor_operation_instance/gpu/gemm_universal/device_gemm_xdl_universal_bf16_bf16_bf16/"
    "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_default_instance.cpp"
)
A8W8_CONFIG = "aiter/configs/a8w8_blockscale_bpreshuffle_tuned_gemm.csv"


def _harness_bundle(path: Path) -> Path:
    """A harness bundle with one cold timing for the shape of a real tuned config row (M=16,
    N=512, K=7168 on gfx950); the timing itself is test input, not a measurement."""
    lines = [
        {
            "record": "bundle",
            "kind": "harness",
            "created": "2026-01-01T00:00:00Z",
            "host": {
                "hostname": "test",
                "gpu": "AMD Instinct MI355X",
                "arch": "gfx950",
                "cu_count": 256,
            },
        },
        {
            "record": "harness_results",
            "run_id": "web-test",
            "device": "AMD Instinct MI355X",
            "arch": "gfx950",
            "M": 16,
            "N": 512,
            "K": 7168,
            "dtype": "fp8",
            "out_dtype": "bf16",
            "layout": "tn",
            "regime": "cold",
            "candidate": "aiter:gemm_a8w8_blockscale_bpreshuffle:7",
            "kernel_id": 7,
            "status": "ok",
            "us": 20.0,
            "pass_no": 1,
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.fixture(scope="module")
def web_db(request, tmp_path_factory) -> Path:
    """A copy of the wheel knowledge base with races (two archs, same shape) and a harness run.
    $CKKB_WEB_TEST_BASE_DB names an already built wheel knowledge base to copy instead of
    building one (a shortcut while iterating; CI leaves it unset)."""
    base = os.environ.get("CKKB_WEB_TEST_BASE_DB")
    base_db = Path(base) if base else request.getfixturevalue("wheel_db")
    d = tmp_path_factory.mktemp("web")
    path = d / "ckkb.db"
    shutil.copy(base_db, path)
    assert ingest(path, [SAMPLES / "001.txt"], arch="gfx942").races_added == 1
    assert ingest(path, [SAMPLES / "012.txt"], arch="gfx950").races_added == 1
    assert ingest(path, [FIXTURE_RACE], arch="gfx942").races_added == 1
    assert ingest(path, [FIXTURE_RACE_950], arch="gfx950").races_added == 1
    ingest(path, [_harness_bundle(d / "harness.jsonl")])
    ingest(path, [harness_fleet_bundle(d / "fleet.jsonl")])  # fleet_spread: 3 GPUs, 1 slow
    return path


@pytest.fixture(scope="module")
def ds(web_db):
    datasette = app.make_datasette(web_db)
    asyncio.run(datasette.invoke_startup())
    return datasette


@pytest.fixture(scope="module")
def get(ds):
    def _get(path: str, **params):
        url = path + ("?" + urlencode(params) if params else "")
        return asyncio.run(ds.client.get(url))

    return _get


def rows_of(get, query: str, **params) -> list[dict]:
    r = get(f"/ckkb/{query}.json", _shape="array", _size="max", **params)
    assert r.status_code == 200, r.text[:500]
    return r.json()


def _race_id(get, sample: str) -> int:
    rows = rows_of(get, "race_spread", race_id="")
    return (
        next(r["id"] for r in rows if r["winner"] and sample in r["winner"])
        if sample
        else rows[0]["id"]
    )


# ---------------------------------------------------------------- the canned queries, one case each


def check_why_missing(get, rows):
    assert all((r["tile_m"], r["tile_n"], r["tile_k"]) == (256, 224, 64) for r in rows)
    hit = [
        r
        for r in rows
        if r["list_name"] == PART2 and r["function"].endswith("_comp_default_instances")
    ]
    assert len(hit) == 1
    assert hit[0]["available"] == 0 and hit[0]["layer"] == "registration"
    assert (hit[0]["evidence_file"], hit[0]["evidence_line"]) == (GATE_CPP, 20)
    assert 'get_device_name() != "gfx950"' in hit[0]["evidence"]
    assert hit[0]["list_comment"] == "instances not working on gfx950"


def check_pool(get, rows):
    # per-arch counts in one JSON object, keyed by the tree's archs (issue 13: never fixed)
    per = [json.loads(r["per_arch"]) for r in rows]
    assert rows and all(p["gfx950"] > 0 for p in per)
    assert list(per[0]) == [
        "gfx908",
        "gfx90a",
        "gfx942",
        "gfx950",
        "gfx1030",
        "gfx1100",
        "gfx1101",
        "gfx1102",
        "gfx1200",
        "gfx1201",
    ]  # the default tree's CMake targets, in its order
    assert PART2 not in {r["list_name"] for r in rows}  # gated off gfx950
    assert PART2.replace("_part2", "") in {r["list_name"] for r in rows}
    assert all(
        p["gfx942"] > 0
        for r, p in zip(rows, per, strict=True)
        if r["list_name"] == PART2.replace("_part2", "")
    )  # side by side
    page = get("/ckkb/pool", dir="gemm_universal", arch="gfx950")
    assert "<th" in page.text and ">gfx1102<" in page.text  # a column per arch of the tree


def check_gate_census(get, rows):
    def total(effect, d=None):
        return sum(
            r["gates"] for r in rows if r["effect"] == effect and (d is None or r["dir"] == d)
        )

    assert (total("exclude"), total("only")) == (87, 79)  # the field guide's count of gfx950 gates
    assert (total("exclude", "gemm_universal"), total("only", "gemm_universal")) == (45, 6)


def check_arch_diff(get, rows):
    hit = [r for r in rows if r["list_name"] == PART2]
    assert hit and all(r["present_on"] == "gfx942" and r["absent_on"] == "gfx950" for r in hit)
    assert any(f"{GATE_CPP.rsplit('/', 1)[1]}:20" in r["evidence"] for r in hit)


def check_race_spread(get, rows):
    by_arch = {r["arch"]: r for r in rows if (r["M"], r["N"], r["K"]) == (49152, 3072, 768)}
    expected = max(
        float(m.group(1))
        for m in re.finditer(r"Perf:.*?([\d.]+) TFlops", (SAMPLES / "001.txt").read_text())
    )
    assert by_arch["gfx942"]["best"] == pytest.approx(expected)
    assert by_arch["gfx942"]["timed"] > 90 and by_arch["gfx942"]["spread"] > 5
    fixture = [
        r for r in rows if (r["M"], r["N"], r["K"]) == (4096, 4096, 4096) and r["arch"] == "gfx942"
    ]
    assert fixture[0]["best"] == pytest.approx(436.3) and fixture[0]["worst"] == pytest.approx(
        152.4
    )
    assert "BlkTile: 256x224x64" in fixture[0]["winner"]


def check_winner_moves(get, rows):
    assert not [
        r for r in rows if (r["M"], r["N"], r["K"]) == (49152, 3072, 768)
    ]  # samples 001/012: same winner
    moved = [r for r in rows if (r["M"], r["N"], r["K"]) == (4096, 4096, 4096)]
    assert len(moved) == 1
    assert (moved[0]["arch_a"], moved[0]["arch_b"]) == ("gfx942", "gfx950")
    assert (
        "BlkTile: 256x224x64" in moved[0]["winner_a"]
        and "BlkTile: 256x256x32" in moved[0]["winner_b"]
    )


def _audit_rule(get) -> str:
    """The rule with the most findings (rules are D's to add and rename; any real one will do)."""
    rows = rows_of(get, "audit_findings", rule="", severity="", file="")
    assert rows, "the wheel's aiter configs should have audit findings"
    totals: dict[str, int] = {}
    for r in rows:
        totals[r["rule"]] = totals.get(r["rule"], 0) + r["findings"]
    return max(totals, key=totals.get)


def check_audit_findings(get, rows):
    rule = rows[0]["rule"]
    assert all(r["rule"] == rule for r in rows)
    assert all(r["file"].startswith("aiter/configs/") for r in rows)
    n = get(
        "/ckkb.json",
        sql="select count(*) as n from aiter_audit_findings where rule = :r",
        r=rule,
        _shape="array",
    ).json()[0]["n"]
    assert sum(r["findings"] for r in rows) == n > 0


def check_tuner_vs_cold(get, rows):
    hit = [
        r
        for r in rows
        if r["file"] == A8W8_CONFIG and r["candidate"] == "aiter:gemm_a8w8_blockscale_bpreshuffle:7"
    ]
    assert len(hit) == 1
    assert (hit[0]["M"], hit[0]["N"], hit[0]["K"]) == (16, 512, 7168)
    assert hit[0]["cold_us"] == pytest.approx(20.0)
    assert hit[0]["tuner_over_cold"] == pytest.approx(round(hit[0]["tuner_us"] / 20.0, 3))


def check_pool_counts(get, rows):
    avail = {(r["arch"], r["layout"]): r["available"] for r in rows}
    assert avail[("gfx950", "mk_nk")] < avail[("gfx942", "mk_nk")]  # the part2 deny-list


def check_names_coverage(get, rows):
    assert rows and all(r["status"] == "matched" for r in rows)
    r = get(
        "/ckkb.json",
        sql="select count(*) as n from name_schemas where status = 'matched'",
        _shape="array",
    )
    assert len(rows) == r.json()[0]["n"] > 20


KEY_256x224 = (
    "DeviceGemmXdlUniversal<Default,RCR>BlkSize:256,BlkTile:256x224x64,WaveTile:16x16,WaveMap:8x7,VmemReadVec:8x8,"
    "BlkGemmPipelineScheduler:Intrawave,BlkGemmPipelineVersion:v3,BlkGemmPipelinePrefetchStages:*,Kpack:*"
)


def check_names_locate(get, rows):
    assert PART2 in {r["list_name"] for r in rows}


def check_names_availability(get, rows):
    by_arch = {r["arch"]: r for r in rows}
    assert by_arch["gfx942"]["available"] == 1 and by_arch["gfx950"]["available"] == 0


def _registration_id(get) -> str:
    rows = rows_of(get, "why_missing", tile="256x224x64", arch="gfx950")
    return str(next(r["registration_id"] for r in rows if r["list_name"] == PART2))


def check_fleet_spread(get, rows):
    # tests/fleet_bundles.py: GPU g2 of node7 is the slow one on both shapes
    assert sorted((r["gpu"], r["M"]) for r in rows if r["outlier"]) == [("g2", 64), ("g2", 4096)]
    svg = get("/-/ckkb/chart/fleet-spread.svg", arch="gfx942")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert "node7 g2: 2 of 2 rows outliers" in svg.text
    page = get("/ckkb/fleet_spread", arch="gfx942")
    assert "/-/ckkb/chart/fleet-spread.svg" in page.text  # the script that puts the chart there


def check_version_diff(get, rows):
    assert rows == []
    # every gemm_universal bf16 entry was paired with itself
    n = get(
        "/ckkb.json",
        sql="select count(*) as n from instances where dir = 'gemm_universal' "
        "and a_dtype = 'bhalf_t' and b_dtype = 'bhalf_t' and c_dtype = 'bhalf_t'",
        _shape="array",
    ).json()[0]["n"]
    assert n > 100


CASES = {
    "why_missing": (lambda get: {"tile": "256x224x64", "arch": "gfx950"}, check_why_missing),
    "pool": (lambda get: {"dir": "gemm_universal", "arch": "gfx950"}, check_pool),
    "pool_counts": (lambda get: {"dir": "gemm_universal", "dtype": "bhalf_t"}, check_pool_counts),
    "gate_census": (lambda get: {"kind": "device_name", "arch": "gfx950"}, check_gate_census),
    "arch_diff": (lambda get: {"arch_a": "gfx942", "arch_b": "gfx950"}, check_arch_diff),
    "race_spread": (lambda get: {"race_id": ""}, check_race_spread),
    "winner_moves": (lambda get: {}, check_winner_moves),
    "audit_findings": (
        lambda get: {"rule": _audit_rule(get), "severity": "", "file": ""},
        check_audit_findings,
    ),
    "tuner_vs_cold": (lambda get: {"arch": "gfx950"}, check_tuner_vs_cold),
    "names_coverage": (lambda get: {"status": "matched"}, check_names_coverage),
    "names_locate": (lambda get: {"key": KEY_256x224}, check_names_locate),
    "names_availability": (
        lambda get: {"registration_id": _registration_id(get)},
        check_names_availability,
    ),
    "fleet_spread": (lambda get: {"arch": "gfx942", "slack": ""}, check_fleet_spread),
    "version_diff": (
        lambda get: {
            "from": "1.2.0",
            "to": "1.2.0",
            "arch": "gfx942",
            "dir": "gemm_universal",
            "dtype": "bhalf_t",
        },
        check_version_diff,
    ),
}
# this database holds one CK tree: its diff against itself is empty (every instance pairs with
# itself); tests/unit/test_versions_diff.py serves the page with rows from two trees
EMPTY = {"version_diff"}


def test_every_canned_query_has_a_case():
    assert set(canned_queries()) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_canned_query(get, name):
    params_fn, check = CASES[name]
    params = params_fn(get)
    rows = rows_of(get, name, **params)
    assert rows or name in EMPTY, f"{name} returned no rows for {params}"
    check(get, rows)
    # the HTML page of the same query: its title, the parameters filled in, the rows
    r = get(f"/ckkb/{name}", **params)
    assert r.status_code == 200
    assert canned_queries()[name].title in r.text
    assert "<table" in r.text if rows else "ckkb-summary" in r.text


def test_canned_query_results_link_to_explain_pages(get):
    r = get("/ckkb/why_missing", tile="256x224x64", arch="gfx950")
    links = set(re.findall(r'href="/-/ckkb/instance/(\d+)"', r.text))
    ids = {
        str(x["instance_id"]) for x in rows_of(get, "why_missing", tile="256x224x64", arch="gfx950")
    }
    assert links == ids
    r = get("/ckkb/race_spread", race_id="")
    assert 'href="/-/ckkb/chart/race-spread?race=' in r.text


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "query, params, message",
    [
        (
            "why_missing",
            {"tile": "256x224x64", "arch": "gfx951"},
            "unknown arch &#39;gfx951&#39; for &#39;arch&#39; (did you mean gfx950",
        ),
        (
            "why_missing",
            {"tile": "256x224", "arch": "gfx950"},
            "malformed tile &#39;256x224&#39;: expected MxNxK",
        ),
        ("why_missing", {"tile": "256x224x64"}, "missing parameter &#39;arch&#39;"),
        ("why_missing", {"tile": "256x224x64", "arch": ""}, "missing parameter &#39;arch&#39;"),
        (
            "pool",
            {"dir": "gemm_univresal", "arch": "gfx950"},
            "unknown dir &#39;gemm_univresal&#39; (did you mean gemm_universal,",
        ),
        (
            "arch_diff",
            {"arch_a": "gfx942", "arch_b": "mi300"},
            "unknown arch &#39;mi300&#39; for &#39;arch_b&#39;",
        ),
        ("race_spread", {"race_id": "first"}, "&#39;race_id&#39; must be an integer id"),
    ],
)
def test_bad_params_get_a_readable_page(get, query, params, message):
    r = get(f"/ckkb/{query}", **params)
    assert r.status_code == 400
    assert message in r.text
    assert "Traceback" not in r.text and "<form" in r.text


def test_bad_params_json(get):
    r = get("/ckkb/why_missing.json", tile="big", arch="gfx950")
    assert r.status_code == 400
    assert r.json()["ok"] is False
    assert r.json()["errors"][0].startswith("malformed tile 'big'")


def test_bad_explain_requests(get):
    assert get("/-/ckkb/instance/99999999").status_code == 404
    r = get("/-/ckkb/instance/twelve")
    assert r.status_code == 400 and "is not an instance id" in r.text
    r = get("/-/ckkb/chart/race-spread", race="x")
    assert r.status_code == 400 and "is not a race id" in r.text
    assert get("/-/ckkb/chart/race-spread", race="999999").status_code == 404


# ---------------------------------------------------------------- security: read-only, time-limited


def test_write_attempts_fail(ds, get, web_db):
    before = rows_of(get, "gate_census", kind="", arch="")
    for sql in (
        "delete from gates",
        "update gates set arch = 'x'",
        "insert into build_info values ('k', 'v', null)",
        "drop table gates",
        "with x as (select 1) delete from gates",
        "attach database ':memory:' as m",
    ):
        r = get("/ckkb.json", sql=sql)
        assert r.status_code == 400, sql
        assert r.json()["ok"] is False
    for path in ("/ckkb/gates/-/insert", "/ckkb/-/create", "/ckkb/why_missing"):
        r = asyncio.run(ds.client.post(path, json={"row": {"id": 1}}))
        assert r.status_code in (403, 404, 405), (path, r.status_code)
    assert rows_of(get, "gate_census", kind="", arch="") == before
    # served live (ingests and builds may change the file) but never writable through Datasette
    with pytest.raises(sqlite3.OperationalError, match="read-only"):
        ds.databases["ckkb"].connect(write=True)


def test_arbitrary_sql_read_only_and_time_limited(get):
    r = get(
        "/ckkb.json",
        sql="select count(*) as n from instances where dir = :d",
        d="gemm_universal",
        _shape="array",
    )
    assert r.status_code == 200 and r.json()[0]["n"] > 500
    slow = (
        "with recursive c(x) as (select 1 union all select x + "
        "1 from c where x < 1000000000) select count(*) from c"
    )
    r = get("/ckkb.json", sql=slow)
    assert r.status_code == 400
    assert "SQL query took too long" in r.json()["error"]


# ---------------------------------------------------------------- explain page, charts, metadata


def _part2_instance(get) -> int:
    rows = rows_of(get, "why_missing", tile="256x224x64", arch="gfx950")
    return next(r["instance_id"] for r in rows if r["list_name"] == PART2)


def test_explain_page(get):
    iid = _part2_instance(get)
    r = get(f"/-/ckkb/instance/{iid}")
    assert r.status_code == 200
    html = r.text
    gfx950 = re.search(r'<tr data-arch="gfx950">(.*?)</tr>', html, re.S).group(1)
    assert (
        "ckkb-no" in gfx950
        and "registration" in gfx950
        and "comp_default_instance.cpp:20" in gfx950
    )
    gfx942 = re.search(r'<tr data-arch="gfx942">(.*?)</tr>', html, re.S).group(1)
    assert "ckkb-yes" in gfx942 and "2 of 2" in gfx942
    assert (
        "add_device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_kpadding_instances" in html
    )  # every registration
    assert html.count("ckkb-gates") == 1 and "Gates (2)" in html
    assert "Race results (1)" in html and "436.3" in html  # through the names join
    # the f16 twin prints the same name (names carry no data types): the bf16 race is not its result
    rows = rows_of(get, "why_missing", tile="256x224x64", arch="gfx950")
    twin = next(
        r["instance_id"]
        for r in rows
        if r["list_name"] == PART2.replace("bf16_bf16_bf16", "f16_f16_f16")
    )
    assert "Race results (0)" in get(f"/-/ckkb/instance/{twin}").text


def test_explain_links_to_repository_when_configured(web_db, monkeypatch):
    monkeypatch.setenv("CKKB_CK_REPO_URL", "https://github.com/ROCm/composable_kernel/blob/develop")
    datasette = app.make_datasette(web_db)

    async def go():
        await datasette.invoke_startup()
        rows = (
            await datasette.client.get(
                "/ckkb/why_missing.json?tile=256x224x64&arch=gfx950&_shape=array"
            )
        ).json()
        iid = next(r["instance_id"] for r in rows if r["list_name"] == PART2)
        html = (await datasette.client.get(f"/-/ckkb/instance/{iid}")).text
        assert (
            f'href="https://github.com/ROCm/composable_kernel/blob/develop/{GATE_CPP}#L20"' in html
        )
        html = (await datasette.client.get("/ckkb/why_missing?tile=256x224x64&arch=gfx950")).text
        assert (
            f'href="https://github.com/ROCm/composable_kernel/blob/develop/{GATE_CPP}#L20"' in html
        )  # evidence_file cell

    asyncio.run(go())


def test_race_spread_chart(get, web_db):
    race = _race_id(get, "BlkTile: 256x224x64")
    r = get("/-/ckkb/chart/race-spread", race=str(race))
    assert r.status_code == 200
    assert r.text.count("<rect") == 4
    assert "436.3 TFLOPS" in r.text.replace(",", "") or ">436<" in r.text
    assert "2.86× spread" in r.text
    assert re.search(r'href="/-/ckkb/instance/\d+"', r.text)  # bars link to explain pages
    # gfx942 is an MI300X: its data sheet's dense fp16/bf16 peak (ckkb.harness.roofline.PEAKS)
    assert "MI300X peak 1,307" in r.text and 'class="ckkb-refline"' in r.text
    # each bar's link is an instance `ckkb locate --dtype bf16 NAME` finds (name_queries.locate
    # itself)
    db = sqlite_utils.Database(web_db)
    bars = re.findall(
        r'<a href="/-/ckkb/instance/(\d+)"><text class="ckkb-label" data-name="([^"]+)"', r.text
    )
    assert bars
    for iid, name in bars:
        located = name_queries.locate(db, html.unescape(name), dtype="bf16")
        assert int(iid) in {e["instance_id"] for e in located["entries"]}
    r = get("/-/ckkb/chart/race-spread")
    assert r.status_code == 200 and f'value="{race}"' in r.text


def test_gate_census_chart(get):
    r = get("/-/ckkb/chart/gate-census", arch="gfx950")
    assert r.status_code == 200
    assert "87 exclude, 79 only" in r.text
    assert "gemm_universal" in r.text and r.text.count("<rect") > 20


def test_metadata_facets_search_and_descriptions(get):
    meta = get("/-/metadata.json").json()
    tables = meta["databases"]["ckkb"]["tables"]
    assert tables["instances"]["columns"]["tile_m"] == "MPerBlock"
    r = get("/ckkb/gates.json", _shape="objects")
    assert {"kind", "arch", "effect", "dir"} <= set(r.json()["facet_results"])
    r = get("/ckkb/instances.json", _search="part2", _shape="objects", _size="5")
    assert r.status_code == 200 and all("part2" in x["list_name"] for x in r.json()["rows"])
    r = get("/ckkb/instances", list_name=PART2)
    assert "ckkb-explain" in r.text
