"""The web layer on a tiny hand-built knowledge base: metadata, parameter checks, explain page,
charts, page shaping, facets."""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckkb.archs import ARCHS
from ckkb.kb import db as kbdb
from ckkb.kb.build.writer import insert_rows
from ckkb.kb.schema import TABLES
from ckkb.kb.schema.ck_instances import InstanceListRow, InstanceRow
from ckkb.kb.schema.ck_registrations import AvailabilityRow, GateRow, RegistrationRow
from ckkb.kb.schema.core import SourceRow
from ckkb.queries import explain
from ckkb.web import app, charts, metadata, validate

CPP = "library/src/tensor_operation_instance/gpu/gemm_universal/x/x_comp_default_instance.cpp"
HPP = "library/src/tensor_operation_instance/gpu/gemm_universal/x/x.hpp"


@pytest.fixture
def tiny_kb(tmp_path):
    """One part2 list with two entries, registered under a `!= "gfx950"` gate."""
    path = tmp_path / "tiny.db"
    db = kbdb.open_db(path, create=True)
    rows = [
        InstanceListRow(
            id=1,
            name="x_comp_instances_part2",
            dir="gemm_universal",
            file=HPP,
            line=40,
            template_params=[],
            comment="instances not working on gfx950",
            entries=2,
        ),
        InstanceRow(
            id=7,
            list_id=1,
            list_name="x_comp_instances_part2",
            dir="gemm_universal",
            file=HPP,
            line=44,
            ordinal=0,
            template="DeviceGemm_Xdl_CShuffleV3",
            status="active",
            fields={"MPerBlock": 256, "NPerBlock": 224, "KPerBlock": 64},
            tile_m=256,
            tile_n=224,
            tile_k=64,
            block_size=256,
            pipeline="v3",
        ),
        InstanceRow(
            id=8,
            list_id=1,
            list_name="x_comp_instances_part2",
            dir="gemm_universal",
            file=HPP,
            line=45,
            ordinal=1,
            template="DeviceGemm_Xdl_CShuffleV3",
            status="active",
            tile_m=224,
            tile_n=256,
            tile_k=64,
        ),
        RegistrationRow(
            id=3,
            function="add_x_comp_default_instances",
            dir="gemm_universal",
            file=CPP,
            line=22,
            list_name="x_comp_instances_part2",
            list_id=1,
            bindings={"GemmSpec": "GemmDefault"},
            condition='ck::get_device_name() != "gfx950"',
            conditions=[
                {
                    "kind": "device_name",
                    "text": 'ck::get_device_name() != "gfx950"',
                    "branch": "then",
                    "file": CPP,
                    "line": 20,
                    "arch": "gfx950",
                    "op": "!=",
                }
            ],
        ),
        GateRow(
            id=5,
            kind="device_name",
            arch="gfx950",
            effect="exclude",
            dir="gemm_universal",
            file=CPP,
            line=20,
            condition='ck::get_device_name() != "gfx950"',
            function="add_x_comp_default_instances",
        ),
    ]
    for arch in ARCHS:
        gated = arch == "gfx950"
        rows.append(
            AvailabilityRow(
                registration_id=3,
                arch=arch,
                available=not gated,
                layer="registration" if gated else None,
                file=CPP if gated else None,
                line=20 if gated else None,
                condition='ck::get_device_name() != "gfx950"' if gated else None,
            )
        )
    insert_rows(db, rows, source_id=1)
    # the tree those rows came from (a build always writes it; the tree parameter reads it)
    insert_rows(db, [SourceRow(id=1, kind="ck", path="/ck", version="1.2.0", name="1.2.0")])
    kbdb.finish_schema(db)
    db.close()
    return path


TEST_QUERY = metadata.parse_canned(
    "tile_probe",
    "-- title: Tile probe\n-- description: instances with this tile\n"
    "-- and a second description line\n-- params: tile, arch, dir?\n"
    "select i.id as instance_id, i.list_name, :arch as arch from instances i "
    "where i.tile_m || 'x' || i.tile_n || 'x' || i.tile_k = :tile "
    "and (:dir = '' or i.dir = :dir)\n",
)


@pytest.fixture
def with_test_query(monkeypatch):
    monkeypatch.setattr(
        metadata, "canned_queries", lambda: {"tile_probe": metadata.with_tree(TEST_QUERY)}
    )


def run(ds, coro_fn):
    async def go():
        await ds.invoke_startup()
        return await coro_fn(ds.client)

    return asyncio.run(go())


# ---------------------------------------------------------------- metadata


def test_parse_canned_headers():
    q = TEST_QUERY
    assert q.title == "Tile probe"
    assert q.description == "instances with this tile and a second description line"
    assert q.params == ("tile", "arch", "dir")
    assert q.required == ("tile", "arch")
    assert q.sql.startswith("-- title: Tile probe")


def test_description_html_marks_params():
    html = metadata.description_html(TEST_QUERY)
    assert html.startswith("instances with this tile")
    assert (
        "required: <code>tile</code>, <code>arch</code>; may be left empty: <code>dir</code>"
        in html
    )
    q = metadata.parse_canned("q", "-- description: a `<b>` & `x`\n-- params: x\nselect :x")
    assert metadata.description_html(q).startswith("a <code>&lt;b&gt;</code> &amp; <code>x</code>")


def test_optional_from_sql():
    q = metadata.parse_canned(
        "q",
        "-- params: a, b, c, d\nselect 1 where (:a = '' or x = :a) and (:b is null or y = :b) "
        "and ('' = :c or 1) and z = :d -- :d = ''",
    )
    assert q.required == ("d",)


def test_parse_canned_adds_sql_params_missing_from_header():
    q = metadata.parse_canned(
        "q",
        "-- title: T\nselect * from t where a = :alpha and b = ':notaparam' -- :comment\n"
        " and c = :beta",
    )
    assert q.params == ("alpha", "beta")
    assert q.title == "T" and q.description == ""


names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
text = (
    st.text(
        st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters=","),
        min_size=1,
        max_size=40,
    )
    .map(str.strip)
    .filter(bool)
)


@given(title=text, desc=text, params=st.lists(names, unique=True, max_size=5))
def test_parse_canned_roundtrip(title, desc, params):
    sql = f"-- title: {title}\n-- description: {desc}\n-- params: {', '.join(params)}\nselect 1\n"
    q = metadata.parse_canned("n", sql)
    assert q.title == title
    assert q.description == desc
    assert list(q.params) == params
    assert q.required == tuple(params)


def test_metadata_describes_every_table_from_the_schema():
    meta = metadata.build_metadata("kb")
    tables = meta["databases"]["kb"]["tables"]
    assert set(tables) == set(TABLES)
    for t in TABLES.values():
        assert t.doc in tables[t.name]["description"]
        for c in t.columns:
            if c.doc:
                assert tables[t.name]["columns"][c.name].startswith(c.doc)
    assert tables["instances"]["facets"] == [
        "dir",
        "template",
        "status",
        {"vocab": "pipeline"},
        {"vocab": "scheduler"},
    ]
    assert tables["gates"]["facets"][:2] == ["kind", "arch"]
    assert tables["instances"]["label_column"] == "list_name"
    assert meta["title"].startswith("ckkb")


def test_metadata_canned_queries_are_the_sql_files():
    from ckkb.kb.trees import scoped_sql
    from ckkb.queries import sql

    meta = metadata.build_metadata("kb")
    queries = meta["databases"]["kb"]["queries"]
    assert set(queries) == set(metadata.canned_queries())
    for name, q in queries.items():
        # the text the CLI runs, not a copy, reading the tree `:tree` names
        assert q["sql"] == scoped_sql(sql(name), "tree")
        # `tree` where the tree changes the answer: the served SQL reads it
        assert (q["params"][-1] == "tree") == (":tree" in q["sql"]), name
        assert q["title"] and q["title"] != name, f"{name}.sql has no -- title: header"
        assert q.get("description_html"), f"{name}.sql has no -- description: header"
        assert q["hide_sql"] is True


def test_tree_only_where_it_changes_the_answer():
    """version_diff names its two trees (`from`, `to`) and reads main.*; fleet_spread reads
    harness results, which belong to no tree: neither offers a `tree` that would change
    nothing. Every other canned query reads a tree's rows and takes it."""
    qs = metadata.canned_queries()
    without = {n for n, q in qs.items() if "tree" not in q.params}
    assert without == {"version_diff", "fleet_spread"}
    assert "tree" in qs["why_missing"].optional
    main_only = metadata.parse_canned(
        "m", "-- params: a\nselect * from main.instances where 1 = :a"
    )
    assert metadata.with_tree(main_only).params == ("a",)
    scoped = metadata.parse_canned("s", "-- params: a\nselect * from instances where 1 = :a")
    assert metadata.with_tree(scoped).params == ("a", "tree")


# ---------------------------------------------------------------- parameter checks


@given(
    dims=st.tuples(st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 4096)),
    sep=st.sampled_from(["x", "X", " x ", "×", "*", ","]),
)
def test_tile_spellings_normalise(dims, sep):
    raw = sep.join(str(d) for d in dims)
    checked = validate.check(["tile"], ["tile"], {"tile": raw})
    assert checked.ok
    canonical = "x".join(str(d) for d in dims)
    assert checked.normalised.get("tile", raw) == canonical


@pytest.mark.parametrize(
    "bad", ["256x224", "256x224x", "axbxc", "0x224x64", "256x224x64x2", "-1x2x3", "256 224 64"]
)
def test_malformed_tile(bad):
    checked = validate.check(["tile", "arch"], ["tile", "arch"], {"tile": bad, "arch": "gfx950"})
    assert len(checked.errors) == 1
    assert checked.errors[0].startswith(f"malformed tile '{bad.strip()}'")
    assert "MxNxK" in checked.errors[0]


def test_arch_and_missing_and_dir():
    c = validate.check(
        ["tile", "arch", "other_arch", "dir"],
        ["tile", "arch", "other_arch"],
        {"arch": "gfx951", "other_arch": " GFX942 ", "dir": "gemm_univrsal"},
        dirs={"gemm_universal", "batched_gemm"},
    )
    assert c.errors[0] == "missing parameter 'tile': give a tile as MxNxK, e.g. 256x224x64"
    assert c.errors[1].startswith("unknown arch 'gfx951' for 'arch' (did you mean gfx950")
    assert "unknown dir 'gemm_univrsal' (did you mean gemm_universal?)" in c.errors[2]
    assert c.normalised == {"other_arch": "gfx942"}
    assert validate.check(["dir"], [], {"dir": ""}).ok  # optional and empty: fine


# ---------------------------------------------------------------- explain, charts


def test_explain_data(tiny_kb, monkeypatch):
    monkeypatch.setenv("CKKB_CK_REPO_URL", "https://github.com/ROCm/composable_kernel/blob/abc/")
    conn = kbdb.open_db(tiny_kb).conn
    x = explain.explain(conn, 7)
    assert x["instance"]["fields"] == {"MPerBlock": 256, "NPerBlock": 224, "KPerBlock": 64}
    assert x["source"]["url"] == f"https://github.com/ROCm/composable_kernel/blob/abc/{HPP}#L44"
    assert [r["id"] for r in x["registrations"]] == [3]
    assert [g["id"] for g in x["gates"]] == [5]
    by_arch = {a["arch"]: a for a in x["arch_table"]}
    assert set(by_arch) == set(ARCHS)
    assert by_arch["gfx942"]["available"] is True
    assert by_arch["gfx950"] == {
        "arch": "gfx950",
        "available": False,
        "registrations": "0 of 1",
        "layer": "registration",
        "file": CPP,
        "line": 20,
        "condition": 'ck::get_device_name() != "gfx950"',
        "url": f"https://github.com/ROCm/composable_kernel/blob/abc/{CPP}#L20",
    }
    assert x["races"] == [] and "no race" in x["race_note"]
    assert explain.explain(conn, 999) is None
    monkeypatch.delenv("CKKB_CK_REPO_URL")
    assert explain.explain(conn, 7)["source"]["url"] is None


def test_charts_svg():
    svg = charts.hbar_svg(
        [charts.Bar("a<b>", 10.0, href="/x?a=1&b=2"), charts.Bar("c", 5.0, highlight=True)],
        unit="TFLOPS",
    )
    assert svg.count("<rect") == 2
    assert "a&lt;b&gt;" in svg and "/x?a=1&amp;b=2" in svg
    widths = [
        float(w) for w in re.findall(r'<rect class="ckkb-bar[^"]*" .*? width="([\d.]+)"', svg)
    ]
    assert widths[0] == pytest.approx(2 * widths[1])
    assert svg.count('class="ckkb-bar ckkb-winner"') == 1  # the highlighted bar
    assert charts.nice_ticks(436.3) == [0, 100, 200, 300, 400, 500]  # round steps past the top
    assert charts.nice_ticks(0.98) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    svg = charts.stacked_svg(
        [("gemm_universal", {"exclude": 45, "only": 6}), ("batched_gemm", {"only": 4})],
        ["exclude", "only"],
    )
    assert svg.count("<rect") == 2 + 3  # legend + segments
    assert ">51<" in svg and ">4<" in svg
    assert "nothing to chart" in charts.hbar_svg([])


# ---------------------------------------------------------------- over HTTP (Datasette's client)


def test_explain_page_and_links(tiny_kb, monkeypatch):
    monkeypatch.setenv("CKKB_CK_REPO_URL", "https://example.org/ck")
    ds = app.make_datasette(tiny_kb)

    async def go(client):
        r = await client.get("/-/ckkb/instance/7")
        assert r.status_code == 200
        html = r.text
        assert 'data-arch="gfx950"' in html
        row = re.search(r'<tr data-arch="gfx950">(.*?)</tr>', html, re.S).group(1)
        assert (
            "ckkb-no" in row
            and "registration" in row
            and f"https://example.org/ck/{CPP}#L20" in row
        )
        row = re.search(r'<tr data-arch="gfx942">(.*?)</tr>', html, re.S).group(1)
        assert "ckkb-yes" in row
        assert "instances not working on gfx950" in html
        assert f"https://example.org/ck/{HPP}#L44" in html
        r = await client.get("/-/ckkb/instance/999")
        assert r.status_code == 404 and "instance 999 is not in the knowledge base" in r.text
        r = await client.get("/-/ckkb/instance/abc")
        assert r.status_code == 400 and "&#39;abc&#39; is not an instance id" in r.text
        r = await client.get("/tiny/instances")
        assert 'href="/-/ckkb/instance/7"' in r.text and 'href="/-/ckkb/instance/8"' in r.text
        r = await client.get("/tiny/instances/7,1")  # the row page (id, tree): its id links too
        assert re.search(
            r'<td class="col-id[^>]*><a class="ckkb-instance" href="/-/ckkb/instance/7"', r.text
        )
        r = await client.get("/-/ckkb/chart/gate-census?arch=gfx950")
        assert r.status_code == 200 and "gemm_universal" in r.text and "<rect" in r.text
        r = await client.get("/-/ckkb/chart/gate-census?arch=gfx000")
        assert r.status_code == 400 and "unknown arch" in r.text
        r = await client.get("/-/ckkb/chart/race-spread")
        assert r.status_code == 200 and "No races" in r.text

    run(ds, go)


def test_canned_query_params_checked(tiny_kb, with_test_query):
    ds = app.make_datasette(tiny_kb)

    async def go(client):
        r = await client.get("/tiny/tile_probe.json?tile=256x224x64&arch=gfx950&_shape=array")
        assert r.status_code == 200
        assert r.json() == [
            {"instance_id": 7, "list_name": "x_comp_instances_part2", "arch": "gfx950"}
        ]
        r = await client.get("/tiny/tile_probe?tile=256x224x64&arch=gfx950")
        assert (
            r.status_code == 200 and 'href="/-/ckkb/instance/7"' in r.text
        )  # explain link in query results
        r = await client.get("/tiny/tile_probe?tile=256X224X64&arch=GFX950&dir=")
        assert (
            r.status_code == 302
            and r.headers["location"] == "/tiny/tile_probe?tile=256x224x64&arch=gfx950&dir="
        )
        r = await client.get("/tiny/tile_probe?tile=256x224&arch=gfx950")
        assert (
            r.status_code == 400
            and "malformed tile &#39;256x224&#39;" in r.text
            and "<form" in r.text
        )
        r = await client.get("/tiny/tile_probe?tile=256x224x64&arch=gfx9999")
        assert r.status_code == 400 and "unknown arch &#39;gfx9999&#39;" in r.text
        r = await client.get("/tiny/tile_probe?tile=256x224x64")
        assert r.status_code == 400 and "missing parameter &#39;arch&#39;" in r.text
        r = await client.get("/tiny/tile_probe.json?tile=1x2&arch=")
        assert r.status_code == 400
        assert r.json()["errors"] == [
            "malformed tile '1x2': expected MxNxK (MPerBlock x NPerBlock x KPerBlock), "
            "three positive integers, e.g. 256x224x64",
            "missing parameter 'arch': give an architecture, one of " + ", ".join(ARCHS),
        ]
        r = await client.get("/tiny/tile_probe")  # a bare visit shows Datasette's form
        assert r.status_code == 200 and 'name="tile"' in r.text

    run(ds, go)


def test_plugin_alone_under_plain_datasette(tiny_kb, with_test_query):
    """`datasette -i kb.db` with the plugin installed (entry point), no ckkb metadata: the canned
    queries come through the canned_queries hook, the explain page through register_routes."""
    from datasette.app import Datasette

    app.register_plugin()
    ds = Datasette(immutables=[str(tiny_kb)])

    async def go(client):
        r = await client.get("/tiny/tile_probe.json?tile=256x224x64&arch=gfx950&_shape=array")
        assert r.status_code == 200 and [x["instance_id"] for x in r.json()] == [7]
        r = await client.get("/tiny/tile_probe.json?tile=256x224x64&arch=gfx9")
        assert r.status_code == 400
        r = await client.get("/-/ckkb/instance/7")
        assert r.status_code == 200 and 'data-arch="gfx950"' in r.text
        r = await client.post("/tiny/tile_probe", data={"tile": "1x1x1"})
        assert r.status_code == 405

    run(ds, go)


def test_vocab_facet_groups_spellings():
    from ckkb.web import facets

    # hand-written counts: two spellings of the Default scheduler, two template parameters
    rows = [
        ("make_default_loop_scheduler()", 50),
        ("Default", 7),
        ("Intrawave", 20),
        ("BlkGemmPipeSched", 3),
        ("LoopSche", 2),
    ]
    got = facets.grouped("scheduler", rows)
    assert list(got) == ["Default", "Intrawave", facets.PARAMETER]
    assert sum(c for _, c in got["Default"]) == 57
    assert [v for v, _ in got[facets.PARAMETER]] == ["BlkGemmPipeSched", "LoopSche"]
    assert list(facets.grouped("pipeline", [("v3", 4), ("PipVer", 9), ("v1", 1)])) == [
        facets.PARAMETER,
        "v3",
        "v1",
    ]


def test_race_labels_show_what_differs():
    from ckkb.web.race_chart import diff_labels

    # three names of sample 001's form: two differ only in the scheduler, one in the tile
    names = [
        "DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2> NumPrefetch: 1, LoopScheduler: "
        "Interwave, PipelineVersion: v1",
        "DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2> NumPrefetch: 1, LoopScheduler: "
        "Default, PipelineVersion: v1",
        "DeviceGemmXdl<256, 128, 256, 4, 8, 32, 32, 2, 4> NumPrefetch: 1, LoopScheduler: "
        "Default, PipelineVersion: v1",
    ]
    assert diff_labels(names) == [
        "<256,128,128,4,8,32,32,2,2> Interwave",
        "<256,128,128,4,8,32,32,2,2> Default",
        "<256,128,256,4,8,32,32,2,4> Default",
    ]
    split_k = [
        "GemmXdlSplitKCShuffle_MNKPadding_RRR_B128_Vec8x1x4_128x16x8x8 LoopScheduler: Default",
        "GemmXdlSplitKCShuffle_Default_RRR_B256_Vec8x2x8_256x128x4x8 LoopScheduler: Default",
    ]
    assert diff_labels(split_k) == [
        "MNKPadding B128 Vec8x1x4 128x16x8x8",
        "Default B256 Vec8x2x8 256x128x4x8",
    ]


def test_shape_folds_rows_per_instance():
    from ckkb.web import shape, specs

    cols = [
        "instance_id",
        "tile_m",
        "tile_n",
        "tile_k",
        "available",
        "layer",
        "evidence",
        "registration_id",
        "function",
        "registration_file",
        "registration_line",
    ]
    rows = [  # instance 1: one call adds it, one does not; instance 2: no call adds it
        (1, 256, 224, 64, 0, "registration", "gate", 10, "f_a", "a.cpp", 3),
        (1, 256, 224, 64, 1, None, None, 11, "f_b", "b.cpp", 4),
        (2, 256, 224, 64, 0, "build", "cmake", 12, "f_c", "c.cpp", 5),
    ]
    display = [[str(v) for v in r] for r in rows]
    s = shape.shape(
        specs.SPECS["why_missing"], cols, rows, display, {"tile": "256x224x64", "arch": "gfx950"}
    )
    assert len(s.rows) == 2  # one row per instance
    names = [c.name for c in s.columns]
    assert names[:3] == ["available", "instance_id", "tile"] and s.answer == "available"
    first = dict(zip(names, s.rows[0][1], strict=True))
    assert first["available"] == "1" and first["tile"] == "256x224x64"  # the call that adds it
    assert "1 of 2 calls add it" in first["registrations"]
    assert "1 missing" in s.summary and "1 available on gfx950" in s.summary
    assert "registration_file" not in names and "tile_m" not in names


def test_a_query_without_a_spec_gets_the_default_page():
    from ckkb.web import shape, specs

    s = shape.shape(
        specs.spec_for("no_such_query"),
        ["a", "b"],
        [(1, "x"), (2, "y")],
        [["1", "x"], ["2", "y"]],
        {},
    )
    assert [c.name for c in s.columns] == ["a", "b"] and s.columns[0].answer
    assert s.summary == "2 rows." and len(s.rows) == 2


def test_pool_columns_are_the_trees_archs():
    """Issue 13: pool's per-arch columns come from the tree (its `per_arch` object), so a fork's
    own gfx960 gets a column and an arch the tree does not build gets none."""
    from ckkb.web import shape, specs

    cols = ["instance_id", "per_arch", "layout", "list_name", "tile_m", "tile_n", "tile_k"]
    rows = [
        (1, '{"gfx90a": 0, "gfx942": 2, "gfx960": 1}', "mk_nk", "l", 64, 64, 64),
        (2, '{"gfx90a": 1, "gfx942": 1, "gfx960": 1}', "mk_nk", "l", 128, 64, 64),
    ]
    display = [[str(v) for v in r] for r in rows]
    s = shape.shape(specs.SPECS["pool"], cols, rows, display, {"dir": "d", "arch": "gfx960"})
    names = [c.name for c in s.columns]
    assert names[:5] == ["instance_id", "tile", "gfx960", "gfx90a", "gfx942"]
    assert "per_arch" not in names and "gfx950" not in names and s.answer == "gfx960"
    first = dict(zip(names, s.rows[0][1], strict=True))
    assert "2 registering calls add it" in str(first["gfx942"])
    assert s.rows[0][0] == "ckkb-differs" and s.rows[1][0] == ""
    assert "1 also on gfx90a" in s.summary and "2 also on gfx942" in s.summary
