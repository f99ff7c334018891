"""ck.typestrings: GetTypeString() schemas from fixture impl headers, the instance-key join, and
`ckkb locate` / `ckkb names coverage` on a tiny real knowledge base built from ck_mini."""

from __future__ import annotations

import json
import re
import sqlite3

from click.testing import CliRunner

from ckkb import names, pipeline
from ckkb.cli import main
from ckkb.extract import cpp
from ckkb.extract import typestrings as ts
from ckkb.extract.typestrings import keys as ts_keys
from ckkb.extract.typestrings.render import render
from ckkb.kb import db as kbdb
from ckkb.kb.build import build
from ckkb.kb.schema.ck_instances import InstanceListRow, InstanceRow
from ckkb.kb.schema.ck_registrations import RegistrationRow
from ckkb.kb.stages import BuildContext, FileResult
from ckkb.queries import names as name_queries
from ckkb.sources import ck_tree

IMPL = "include/ck/tensor_operation/gpu/device/impl"


def schemas_of(root):
    out = {}
    diags = []
    for f in ts.STAGE.files(root):
        rel = f.relative_to(root).as_posix()
        got, d = ts.extract_schemas(rel, f.read_bytes())
        diags += d
        for s in got:
            out[s["device_op"]] = s
    return out, diags


def test_universal_schema_tokens(fixtures):
    s, _ = schemas_of(fixtures / "ck_mini")
    v3 = s["DeviceGemm_Xdl_CShuffleV3"]
    assert v3["ops"] == ["DeviceGemmXdlUniversal"] and v3["status"] == "partial"
    assert v3["file"] == f"{IMPL}/device_gemm_xdl_cshuffle_v3.hpp" and v3["line"] == 67
    toks = v3["tokens"]
    assert toks[0] == {"lit": "DeviceGemmXdlUniversal<"}
    assert toks[1] == {
        "ref": "GemmSpec",
        "conv": "spec",
        "kind": "enum",
        "fn": "getGemmSpecializationString",
    }
    assert toks[3] == {"ref": "ALayout", "conv": "layout_initial", "kind": "type"}
    refs = [t["ref"] for t in toks if "ref" in t]
    assert refs == [
        "GemmSpec",
        "ALayout",
        "BLayout",
        "CLayout",
        "BlockSize",
        "MPerBlock",
        "NPerBlock",
        "KPerBlock",
        "MPerXDL",
        "NPerXDL",
        "MXdlPerWave",
        "NXdlPerWave",
        "ABlockTransferSrcScalarPerVector",
        "BBlockTransferSrcScalarPerVector",
        "BlkGemmPipeSched",
        "BlkGemmPipelineVer",
    ]
    sched = next(t for t in toks if t.get("ref") == "BlkGemmPipeSched")
    assert sched["conv"] == "enum" and sched["default"] == "BlockGemmPipelineScheduler::Intrawave"
    assert sched["map"] == {
        "BlockGemmPipelineScheduler::Intrawave": "Intrawave",
        "BlockGemmPipelineScheduler::Interwave": "Interwave",
    }
    derived = [t for t in toks if "derived" in t]
    assert derived == [
        {"derived": "PrefetchStages", "expr": "2"},
        {"derived": "AMmaKStride", "expr": "AK1 * 2"},
    ]
    assert v3["reasons"] == [
        "derived: PrefetchStages (a class constant)",
        "derived: AMmaKStride (a class constant)",
    ]
    assert ts.example(toks).startswith(
        "DeviceGemmXdlUniversal<Default, RRR> BlkSize: 1, BlkTile: 1x1x1"
    )


def test_old_style_matched_and_mx_with_macros(fixtures):
    s, diags = schemas_of(fixtures / "ck_mini")
    v2 = s["DeviceGemm_Xdl_CShuffleV2"]
    assert (
        v2["status"] == "matched"
        and v2["reasons"] == []
        and v2["ops"] == ["DeviceGemm_Xdl_CShuffleV2"]
    )
    assert [t.get("conv") for t in v2["tokens"] if "ref" in t][-2:] == ["enum", "enum"]
    xdl = s["DeviceGemmXdl"]
    assert xdl["status"] == "matched" and len([t for t in xdl["tokens"] if "ref" in t]) == 9
    # a macro-only line, `#if 0` with an unbalanced brace and enable_if<X >= 16> do not hide the
    # class
    mx = s["DeviceGemmMX_Xdl_CShuffleV3"]
    assert [p["name"] for p in mx["params"]][:5] == [
        "ALayout",
        "BLayout",
        "CLayout",
        "GemmSpec",
        "ScaleBlockSize",
    ]
    assert mx["status"] == "partial"
    assert {
        "derived": "PrefetchStages",
        "expr": "GridwiseGemm::BlockwiseGemmPipe::PrefetchStages",
    } in mx["tokens"]
    assert mx["tokens"][-1] == {"ref": "ScaleBlockSize", "conv": "value", "kind": "int"}
    assert not [d for d in diags if "device_gemm_mx_names" in d.file]


def test_conditionals_and_delegation(fixtures):
    s, _ = schemas_of(fixtures / "ck_mini")
    red = s["DeviceReduceMultiBlock"]
    assert (
        red["ops"] == ["DeviceReduceBlockWise", "DeviceReduceMultiBlock"]
        and red["status"] == "partial"
    )
    alt = red["tokens"][0]
    assert alt["cond"] == "OutMemoryDataOperation == InMemoryDataOperationEnum::Set"
    assert alt["alt"] == [[{"lit": "DeviceReduceBlockWise<"}], [{"lit": "DeviceReduceMultiBlock<"}]]
    suffix = red["tokens"][-1]
    assert suffix["cond"] == "(PropagateNan)" and suffix["alt"][1] == []
    assert suffix["alt"][0] == [
        {"lit": " Nan: "},
        {"ref": "PropagateNan", "conv": "value", "kind": "bool"},
    ]
    # per file, a delegation is recorded with the class it resolves to through the aliases
    dele = s["DeviceGemmXdlSplitKDelegating"]
    assert dele["status"] == "unsupported"
    assert dele["reasons"] == [
        "delegates to Gridwise::GetTypeString() (another type's GetTypeString)"
    ]
    assert dele["tokens"] == [
        {
            "derived": "Gridwise::GetTypeString()",
            "expr": "Gridwise::GetTypeString()",
            "delegate": True,
            "target": "GridwiseGemmSplitK",
            "args": ["BlockSize", "GemmSpec", "K1"],
        }
    ]
    param = s["DeviceConvDelegatingToParam"]
    assert param["status"] == "unsupported"
    assert param["reasons"] == [
        "delegates to GemmOp{}.GetTypeString(): GemmOp is a template parameter, "
        "so the name is that op's"
    ]


def test_delegation_spliced_in_combine(fixtures):
    root = fixtures / "ck_mini"
    results = {}
    for f in ts.STAGE.files(root):
        rel = f.relative_to(root).as_posix()
        results[rel] = ts.STAGE.extract(root, rel, f.read_bytes())
    assert (
        results["include/ck/tensor_operation/gpu/grid/gridwise_gemm_splitk_names.hpp"].facts[
            "gridwise"
        ][0]["device_op"]
        == "GridwiseGemmSplitK"
    )
    out = ts.STAGE.combine(root, results, BuildContext(trees={}))
    row = next(r for r in out.rows if r.device_op == "DeviceGemmXdlSplitKDelegating")
    assert (row.status, row.ops) == ("matched", ["GemmSplitKFixture"])
    assert row.reasons == [
        "via GridwiseGemmSplitK::GetTypeString() "
        "(include/ck/tensor_operation/gpu/grid/gridwise_gemm_splitk_names.hpp:15)"
    ]
    # the gridwise parameters became the device op's own: Spec_ -> GemmSpec,
    # BlockSize_ -> BlockSize, K1 (a Number<K1Value>{} constant) -> K1Value -> K1
    assert [t.get("ref") for t in row.tokens if "ref" in t] == ["GemmSpec", "BlockSize", "K1"]
    schemas = names.SchemaSet(
        {
            r.device_op: names.schema_from_row(ts_row_dict(r))
            for r in out.rows
            if type(r).__name__ == "NameSchemaRow" and r.status != "unsupported"
        }
    )
    p = names.parse("GemmSplitKFixture_MNKPadding_B256_K8", schemas)
    assert (p.schema, p.op, p.fields) == (
        "matched",
        "GemmSplitKFixture",
        {"GemmSpec": "MNKPadding", "BlockSize": 256, "K1": 8},
    )


def test_for_parsing_keeps_offsets():
    src = (
        b"struct A {\n  MACRO_LINE_IMPL\n#if 0\n  void f( {\n#else\n  int x;\n#endif\n"
        b"  enable_if<N >= 1>\n};\n"
    )
    out = cpp.for_parsing(src)
    assert len(out) == len(src) and out.count(b"\n") == src.count(b"\n")
    assert b"MACRO" not in out and b"void f" not in out and b"int x;" in out and b"N == 1" in out


def test_damaged_headers_never_raise(copy_tree):
    root = copy_tree("ck_mini")
    impl = root / IMPL
    (impl / "junk.hpp").write_bytes(b"\x00\x01GetTypeString\xff" * 50)
    good = (impl / "device_gemm_xdl_cshuffle_v2_names.hpp").read_text()
    (impl / "truncated.hpp").write_text(good[: good.index("<< NPerBlock")])
    s, diags = schemas_of(root)
    assert any(d.file.endswith("junk.hpp") and "binary" in d.message for d in diags)
    assert "DeviceGemm_Xdl_CShuffleV2" in s  # the intact header still reads


def _inst(i, list_id, line, **over):
    fields = {
        "ALayout": "tensor_layout::gemm::RowMajor",
        "BLayout": "Col",
        "CLayout": "Row",
        "GemmSpec": "GemmSpec",
        "BlockSize": 256,
        "MPerBlock": 128,
        "NPerBlock": 128,
        "KPerBlock": 64,
        "AK1": 8,
        "BK1": 8,
        "MPerXDL": 32,
        "NPerXDL": 32,
        "MXdlPerWave": 2,
        "NXdlPerWave": 2,
        "ABlockTransferSrcScalarPerVector": 8,
        "BBlockTransferSrcScalarPerVector": 8,
        "BlkGemmPipeSched": "BlockGemmPipelineScheduler::Intrawave",
    }
    fields.update(over)
    return InstanceRow(
        id=i,
        list_id=list_id,
        list_name=f"list{list_id}",
        dir="gemm_universal",
        file="x.hpp",
        line=line,
        ordinal=i,
        template="DeviceGemm_Xdl_CShuffleV3",
        status="active",
        fields=fields,
    )


def test_instance_keys_join(fixtures):
    root = fixtures / "ck_mini"
    results = {}
    for f in ts.STAGE.files(root):
        rel = f.relative_to(root).as_posix()
        results[rel] = ts.STAGE.extract(root, rel, f.read_bytes())
    lists = [
        InstanceListRow(
            id=1,
            name="list1",
            dir="gemm_universal",
            file="x.hpp",
            line=1,
            template_params=[{"name": "GemmSpec", "type": "GemmSpecialization"}],
        )
    ]
    insts = [_inst(1, 1, 10), _inst(2, 1, 11), _inst(3, 1, 12, MPerBlock=256), _inst(4, 1, 13)]
    insts[3].status = "commented_out"
    regs = [
        RegistrationRow(
            id=7,
            function="add_a",
            dir="gemm_universal",
            file="a.cpp",
            line=5,
            list_name="list1",
            list_id=1,
            bindings={"GemmSpec": "Default"},
        ),
        RegistrationRow(
            id=8,
            function="add_b",
            dir="gemm_universal",
            file="b.cpp",
            line=6,
            list_name="list1",
            list_id=1,
            bindings={"GemmSpec": "MNKPadding"},
        ),
    ]
    ctx = BuildContext(
        trees={}, rows={"instances": insts, "registrations": regs, "instance_lists": lists}
    )
    out = ts.STAGE.combine(root, results, ctx)
    keys = [r for r in out.rows if type(r).__name__ == "InstanceKeyRow"]
    assert len(keys) == 8  # 4 instances x 2 registrations; the commented-out entry is kept, marked
    assert {r.status for r in keys if r.instance_id == 4} == {"commented_out"}
    k = next(r for r in keys if r.instance_id == 1 and r.registration_id == 8)
    assert k.printed_name == (
        "DeviceGemmXdlUniversal<MNKPadding, RCR> BlkSize: 256, BlkTile: 128x128x64, "
        "WaveTile: 32x32, WaveMap: 2x2, "
        "VmemReadVec: 8x8, BlkGemmPipelineScheduler: Intrawave, BlkGemmPipelineVersion: v1, "
        "BlkGemmPipelinePrefetchStages: 2, Kpack: 16"
    )
    assert k.complete and k.derived == ["PrefetchStages", "AMmaKStride"]
    assert k.key == re.sub(r"\s", "", k.printed_name).replace("Stages:2", "Stages:*").replace(
        "Kpack:16", "Kpack:*"
    )
    assert (
        k.padding,
        k.a_layout,
        k.b_layout,
        k.tile_m,
        k.waves_m,
        k.a_vec,
        k.scheduler,
        k.pipeline,
    ) == ("MNKPadding", "Row", "Col", 128, 2, 8, "Intrawave", "v1")
    # instances 1 and 2 print the same name: an ambiguity the key shows
    same = {r.instance_id for r in keys if r.key == k.key and r.status == "active"}
    assert same == {1, 2}
    # a parsed name carries the same key
    schemas = names.SchemaSet(
        {
            s.device_op: names.schema_from_row(ts_row_dict(s))
            for s in out.rows
            if type(s).__name__ == "NameSchemaRow" and s.status != "unsupported"
        }
    )
    assert names.parse(k.printed_name, schemas).key == k.key
    # the coverage summary is a build diagnostic; the delegating op is a warning with its reason
    msgs = [d.message for d in out.diagnostics]
    assert (
        "GetTypeString() name schemas: 6 of 7 implementations "
        "(3 matched, 3 partial with derived or conditional values, 1 unsupported)" in msgs
    )
    assert any(
        "DeviceConvDelegatingToParam" in m and "GemmOp is a template parameter" in m for m in msgs
    )


def ts_row_dict(row):
    from ckkb.kb.schema.base import row_dict

    return row_dict(row)


def test_unbound_list_parameter_is_unknown(fixtures):
    root = fixtures / "ck_mini"
    results = {
        rel: FileResult(facts={"schemas": s})
        for rel, s in [
            (
                f.relative_to(root).as_posix(),
                ts.extract_schemas(f.relative_to(root).as_posix(), f.read_bytes())[0],
            )
            for f in ts.STAGE.files(root)
        ]
    }
    lists = [
        InstanceListRow(
            id=1,
            name="list1",
            dir="d",
            file="x.hpp",
            line=1,
            template_params=[{"name": "GemmSpec"}],
        )
    ]
    ctx = BuildContext(
        trees={},
        rows={"instances": [_inst(1, 1, 10)], "registrations": [], "instance_lists": lists},
    )
    keys = [
        r for r in ts.STAGE.combine(root, results, ctx).rows if type(r).__name__ == "InstanceKeyRow"
    ]
    assert len(keys) == 1 and keys[0].registration_id is None
    assert (
        keys[0].key.startswith("DeviceGemmXdlUniversal<{unknown},RCR>")
        and keys[0].printed_name is None
    )


def test_render_evaluates_conditions():
    toks = [
        {"alt": [[{"lit": "A"}], [{"lit": "B"}]], "cond": "(Flag)"},
        {"lit": "<"},
        {"ref": "N", "conv": "value", "kind": "int"},
        {"lit": ">"},
    ]
    assert render(toks, {"Flag": "true", "N": 4}) == ("*<4>", "A<4>", [])
    assert render(toks, {"Flag": False, "N": 4})[1] == "B<4>"
    assert render(toks, {"N": 4})[1] is None
    toks[0]["cond"] = "Op == InMemoryDataOperationEnum::Set"
    assert render(toks, {"Op": "InMemoryDataOperationEnum::Set", "N": 1})[1] == "A<1>"


def test_build_locate_and_coverage_on_ck_mini(fixtures, tmp_db):
    build(tmp_db, {"ck": ck_tree(str(fixtures / "ck_mini"))}, stages=pipeline.stages(), jobs=1)
    db = kbdb.open_db(tmp_db, readonly=True)
    cov = name_queries.coverage(db)
    assert (
        cov["implementations"],
        cov["with_schema"],
        cov["matched"],
        cov["partial"],
        cov["unsupported"],
    ) == (7, 6, 3, 3, 1)
    assert cov["without_schema"][0]["device_op"] == "DeviceConvDelegatingToParam"
    row = next(
        db.query(
            "select k.printed_name, i.file, i.line from instance_keys k "
            "join instances i on i.id = k.instance_id "
            "where k.complete = 1 and k.op = 'DeviceGemmXdlUniversal' order by i.line limit 1"
        )
    )
    got = name_queries.locate(db, row["printed_name"])
    assert (row["file"], row["line"]) in {(e["file"], e["line"]) for e in got["entries"]}
    e = next(e for e in got["entries"] if e["line"] == row["line"])
    assert e["registrations"] and all(set(r["availability"]) for r in e["registrations"])
    assert isinstance(got["ambiguous"], bool)
    views = {r["name"] for r in db.query("select name from sqlite_master where type = 'view'")}
    assert {"names_ambiguous", "names_schema_status", "names_keys_normalised"} <= views
    db.close()
    r = CliRunner().invoke(
        main, ["locate", row["printed_name"], "--db", str(tmp_db), "--json"], catch_exceptions=False
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["entries"]
    r = CliRunner().invoke(
        main,
        ["locate", row["printed_name"], "--db", str(tmp_db), "--dtype", "bf16", "--json"],
        catch_exceptions=False,
    )
    assert r.exit_code == 0 and {e["a_dtype"] for e in json.loads(r.stdout)["entries"]} == {
        "bhalf_t"
    }
    r = CliRunner().invoke(
        main,
        ["locate", row["printed_name"], "--db", str(tmp_db), "--dtype", "f16", "--json"],
        catch_exceptions=False,
    )
    assert r.exit_code == 1 and json.loads(r.stdout)["entries"] == []
    r = CliRunner().invoke(
        main,
        ["locate", row["printed_name"], "--db", str(tmp_db), "--dtype", "bogus"],
        catch_exceptions=False,
    )
    assert r.exit_code == 2 and "unknown data type 'bogus'" in r.output
    r = CliRunner().invoke(
        main, ["locate", "DeviceGemmXdl<1, 2", "--db", str(tmp_db)], catch_exceptions=False
    )
    assert r.exit_code == 2 and "cannot parse" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(
        main, ["locate", "DeviceSomethingElse<1>", "--db", str(tmp_db)], catch_exceptions=False
    )
    assert (
        r.exit_code == 2
        and "no GetTypeString() in this tree prints 'DeviceSomethingElse'" in r.output
    )
    r = CliRunner().invoke(
        main, ["names", "coverage", "--db", str(tmp_db), "--json"], catch_exceptions=False
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["with_schema"] == 6
    r = CliRunner().invoke(main, ["names", "coverage", "--db", str(tmp_db)], catch_exceptions=False)
    assert (
        "6 of 7 GetTypeString() implementations have a name schema" in r.output
        and "1 do not" in r.output
        and "delegates" in r.output
    )
    r = CliRunner().invoke(
        main, ["parse", row["printed_name"], "--db", str(tmp_db), "--json"], catch_exceptions=False
    )
    assert json.loads(r.stdout)[0]["schema"] == "matched"
    conn = sqlite3.connect(tmp_db)
    n = conn.execute("select count(*) from name_schemas").fetchone()[0]
    conn.close()
    assert n == 7


def _random_fields(rng, names):
    pool = [
        None,
        0,
        1,
        2,
        4,
        8,
        32,
        256,
        True,
        False,
        "1",
        "Row",
        "ColumnMajor",
        "GemmSpecialization::MNKPadding",
        "Default",
        "v3",
        "BlockGemmPipelineScheduler::Intrawave",
        [4, 64, 1],
        "x::y",
    ]
    return {n: rng.choice(pool) for n in names if rng.random() < 0.6}


def test_column_groups_read_only_their_inputs():
    """instance_keys memoises each group of normalised columns by its _INPUTS: nothing else may
    change them."""
    import random

    from ckkb.fields import SYNONYMS, normalise

    rng = random.Random(7)
    every = sorted(
        {n for ns in SYNONYMS.values() for n in ns}
        | set(ts_keys._SIZE_INPUTS)
        | {"Other", "K0", "KPerBlock1"}
    )
    for _ in range(2000):
        f = _random_fields(rng, every)
        full = normalise(f)
        for inputs, cols in (
            (ts_keys._SIZE_INPUTS, ts_keys._SIZE_COLUMNS),
            (ts_keys._KIND_INPUTS, ts_keys._KIND_COLUMNS),
        ):
            part = normalise({k: v for k, v in f.items() if k in inputs})
            assert [part[c] for c in cols] == [full[c] for c in cols], (f, cols)


def test_render_reads_only_fields_read(fixtures):
    """instance_keys memoises render() by the values of _fields_read: nothing else may change it."""
    import random

    s, _ = schemas_of(fixtures / "ck_mini")
    rng = random.Random(3)
    for schema in s.values():
        reads = ts_keys._fields_read(schema["tokens"])
        names = reads + [p["name"] for p in schema["params"]] + ["Other"]
        for _ in range(200):
            f = _random_fields(rng, names)
            assert render(schema["tokens"], f) == render(
                schema["tokens"], {k: v for k, v in f.items() if k in reads}
            )


def test_instance_keys_memo_tells_values_apart():
    """1 and True are equal dict keys but print differently; a list value (conv "at") is memoised
    too."""
    from ckkb.kb.schema.names import NameSchemaRow

    tokens = [
        {"lit": "X<"},
        {"ref": "Flag", "conv": "value", "kind": "bool"},
        {"lit": ","},
        {"ref": "Lens", "conv": "at", "kind": "type", "index": 1},
        {"lit": ">"},
    ]
    schema = NameSchemaRow(
        id=1,
        device_op="DeviceX",
        op="X",
        ops=["X"],
        file="x.hpp",
        line=1,
        tokens=tokens,
        params=[],
        status="matched",
        reasons=[],
    )
    insts = [
        InstanceRow(
            id=i,
            list_id=1,
            list_name="l",
            dir="d",
            file="x.hpp",
            line=i,
            ordinal=i,
            template="DeviceX",
            status="active",
            fields={"Flag": flag, "Lens": lens},
        )
        for i, (flag, lens) in enumerate(
            [(True, [1, 2]), (1, [1, 2]), (1, (1, 2)), (False, [1, 3])], 1
        )
    ]
    keys = ts.instance_keys([schema], insts, [])
    assert [k.printed_name for k in keys] == ["X<True,2>", "X<1,2>", "X<1,2>", "X<False,3>"]


def test_render_keeps_braces_and_unknowns():
    toks = [
        {"lit": "Op{ "},
        {"ref": "N", "conv": "value", "kind": "int"},
        {"lit": " }"},
        {"derived": "Stages", "expr": "N * 2"},
        {"derived": "Other", "expr": "Pipe::X", "delegate": True},
    ]
    assert render(toks[:4], {"N": 4}) == ("Op{4}*", "Op{ 4 }8", ["Stages"])
    assert render(toks, {"N": 4}) == ("Op{4}**", None, ["Stages", "Other"])
    assert render(toks[:3], {}) == ("Op{{unknown}}", None, [])


def test_render_fills_slots_in_token_order():
    """A run-time value before a ref: the name's slots follow the tokens, not refs-then-values; a
    list value (conv "at") prints the same from the memo as the first time."""
    toks = [
        {"lit": "X< "},
        {"derived": "S", "expr": "N * 2"},
        {"lit": ", "},
        {"ref": "N", "conv": "value", "kind": "int"},
        {"lit": ", "},
        {"ref": "Lens", "conv": "at", "kind": "type", "index": 1},
        {"lit": " >"},
    ]
    for _ in range(2):
        assert render(toks, {"N": 4, "Lens": [1, 2]}) == ("X<*,4,2>", "X< 8, 4, 2 >", ["S"])
    assert render(toks, {"Lens": [1, [2]]}) == ("X<*,{unknown},[2]>", None, ["S"])
