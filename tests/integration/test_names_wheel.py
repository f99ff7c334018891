"""Instance names against the installed wheel's CK tree: schema coverage, every schema's own
names, the real samples, and locating the first `_part2` tuple of the bf16 mk_nk_mn
gemm_universal header from names written the way DeviceGemmXdlUniversal prints them."""

from __future__ import annotations

import pytest

from ckkb import names
from ckkb.fields import enum_word
from ckkb.kb import db as kbdb
from ckkb.queries import names as name_queries
from tests.unit.test_names import sample_names

HEADER = (
    "library/src/tensor_operation_instance/gpu/gemm_universal/device_gemm_xdl_universal_bf16_bf16_bf16/"
    "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn.hpp"
)


@pytest.fixture(scope="module")
def db(wheel_db):
    d = kbdb.open_db(wheel_db, readonly=True)
    yield d
    d.close()


@pytest.fixture(scope="module")
def schemas(db):
    return names.load_schemas(db)


def test_coverage_pinned(db):
    cov = name_queries.coverage(db)
    assert (
        cov["implementations"],
        cov["with_schema"],
        cov["matched"],
        cov["partial"],
        cov["unsupported"],
    ) == (125, 124, 76, 48, 1)
    assert [(r["device_op"], r["reasons"]) for r in cov["without_schema"]] == [
        (
            "DeviceGroupedConvBwdWeight_Explicit_Xdl",
            [
                "delegates to DeviceGemmV3Op{}.GetTypeString(): DeviceGemmV3Op "
                "is a template parameter, so the name is that op's"
            ],
        )
    ]
    # split-K and stream-K return their gridwise GEMM's
    # GetTypeString(): followed through the aliases
    streamk = next(r for r in cov["partial_schemas"] if r["device_op"] == "DeviceGemmXdlStreamK")
    assert streamk["reasons"][0].startswith(
        "via GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops_streamk::GetTypeString()"
    )
    # derived values are recorded, not dropped
    v3 = next(r for r in cov["partial_schemas"] if r["device_op"] == "DeviceGemm_Xdl_CShuffleV3")
    assert any(w.startswith("derived: PrefetchStages") for w in v3["reasons"])


def test_every_schema_reads_its_own_example(db, schemas):
    rows = list(
        db.query("select device_op, ops, example from name_schemas where status != 'unsupported'")
    )
    assert len(rows) == 124
    for r in rows:
        p = names.parse(r["example"], schemas)
        assert p.schema == "matched", (r["device_op"], r["example"], p.error)


def test_samples_against_the_wheel(schemas):
    for f, line, name in sample_names():
        assert names.parse(name, schemas).schema != "error", (f, line, name)
    # 024 (2025): today's DeviceGemm_Xdl_CShuffle form, field by field
    p = names.parse(
        "DeviceGemm_Xdl_CShuffle<Default, 64, 32, 64, 32, 8, 8, 32, 32, "
        "1, 2, 8, 8, 1, 1> LoopScheduler: Default, PipelineVersion: v2",
        schemas,
    )
    assert (p.schema, p.device_op) == ("matched", "DeviceGemm_Xdl_CShuffle")
    assert p.fields == {
        "GemmSpec": "Default",
        "BlockSize": 64,
        "MPerBlock": 32,
        "NPerBlock": 64,
        "KPerBlock": 32,
        "AK1": 8,
        "BK1": 8,
        "MPerXDL": 32,
        "NPerXDL": 32,
        "MXdlPerWave": 1,
        "NXdlPerWave": 2,
        "ABlockTransferSrcScalarPerVector": 8,
        "BBlockTransferSrcScalarPerVector": 8,
        "CShuffleMXdlPerWavePerShuffle": 1,
        "CShuffleNXdlPerWavePerShuffle": 1,
        "LoopSched": "Default",
        "PipelineVer": "v2",
    }
    # 011 (2024): split-K names glued into one word, read with the gridwise GEMM's schema
    p = names.parse(
        "GemmXdlSplitKCShuffle_MNKPadding_RRR_B128_Vec8x1x4_32x16x8x8 "
        "LoopScheduler: Default, PipelineVersion: v2, KBatch 2",
        schemas,
    )
    assert (p.schema, p.op, p.device_op) == (
        "matched",
        "GemmXdlSplitKCShuffle",
        "DeviceGemmXdlSplitKCShuffle",
    )
    assert p.fields == {
        "GemmSpec": "MNKPadding",
        "ALayout": "Row",
        "BLayout": "Row",
        "CLayout": "Row",
        "BlockSize": 128,
        "ABlockTransferSrcScalarPerVector": 8,
        "BBlockTransferSrcScalarPerVector": 1,
        "CBlockTransferScalarPerVector_NWaveNPerXDL": 4,
        "MPerBlock": 32,
        "NPerBlock": 16,
        "K0PerBlock": 8,
        "K1": 8,
        "LoopSched": "Default",
        "PipelineVer": "v2",
    }
    assert p.props["KBatch"] == "2" and p.normalised["tile_k"] == 64
    # 002 (2022): an older DeviceGemmMultipleD_Xdl_CShuffle form; the leading arguments still map
    p = names.parse(
        "DeviceGemmMultipleD_Xdl_CShuffle<256, 128, 128, 32, 8, 8, "
        "Default> LoopScheduler: Interwave, PipelineVersion: v1",
        schemas,
    )
    assert p.schema == "generic"
    assert p.fields == {
        "BlockSize": 256,
        "MPerBlock": 128,
        "NPerBlock": 128,
        "KPerBlock": 32,
        "AK1": 8,
        "BK1": 8,
        "LoopSched": "Interwave",
        "PipelineVer": "v1",
    }


def printed_universal(fields: dict, spec: str) -> str:
    """A name the way DeviceGemmXdlUniversal's
    GetTypeString() prints it (run-time values arbitrary)."""
    f = fields
    lay = "".join(
        {"Row": "R", "Col": "C"}[enum_word(f[k])] for k in ("ALayout", "BLayout", "CLayout")
    )
    sched = enum_word(f.get("BlkGemmPipeSched") or "Intrawave")
    ver = enum_word(f.get("BlkGemmPipelineVer") or "v1")
    return (
        f"DeviceGemmXdlUniversal<{spec}, {lay}> BlkSize: {f['BlockSize']}, "
        f"BlkTile: {f['MPerBlock']}x{f['NPerBlock']}x{f['KPerBlock']}, "
        f"WaveTile: {f['MPerXDL']}x{f['NPerXDL']}, WaveMap: {f['MXdlPerWave']}x{f['NXdlPerWave']}, "
        "VmemReadVec: "
        f"{f['ABlockTransferSrcScalarPerVector']}x{f['BBlockTransferSrcScalarPerVector']}, "
        f"BlkGemmPipelineScheduler: {sched}, BlkGemmPipelineVersion: "
        f"{ver}, BlkGemmPipelinePrefetchStages: 2, Kpack: 8"
    )


def test_part2_instances_locate_back_to_their_lines(db, schemas):
    lst = next(
        db.query(
            "select id, name, line from instance_lists where file = ? "
            "and name like '%\\_part2' escape '\\' order by line limit 1",
            [HEADER],
        )
    )
    assert lst["name"] == "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances_part2"
    insts = list(
        db.query(
            "select id, line, status, reason, fields from "
            "instances where list_id = ? order by ordinal",
            [lst["id"]],
        )
    )
    assert len(insts) == 6
    assert [i["status"] for i in insts].count("commented_out") == 1
    import json

    for inst in insts:
        name = printed_universal(json.loads(inst["fields"]), "Default")
        got = name_queries.locate(db, name, schemas)
        hits = [e for e in got["entries"] if (e["file"], e["line"]) == (HEADER, inst["line"])]
        assert len(hits) == 1, (name, [(e["file"], e["line"]) for e in got["entries"]])
        e = hits[0]
        assert e["list"] == lst["name"] and e["status"] == inst["status"]
        if inst["status"] == "active":
            regs = e["registrations"]
            assert regs and all(r["bindings"] == {"GemmSpec": "Default"} for r in regs)
            # the part2 tuple is registered behind the gfx950 gate
            assert any(
                r["availability"]["gfx950"]["available"] is False
                and r["availability"]["gfx942"]["available"]
                for r in regs
            )
        else:
            assert e["reason"] == "AGPR Spill"


def test_ambiguity_is_visible(db, schemas):
    n = next(db.query("select count(*) as n from names_ambiguous"))["n"]
    assert n > 1000
    row = next(
        db.query(
            "select key, entries from names_ambiguous where op "
            "= 'DeviceGemmXdlUniversal' order by key limit 1"
        )
    )
    name = row["key"].replace(
        "*", "2"
    )  # a key is a printed name without whitespace; '*' are run-time values
    got = name_queries.locate(db, name, schemas)
    assert (
        got["ambiguous"]
        and len([e for e in got["entries"] if e["status"] == "active"]) == row["entries"]
    )


def test_instance_keys_carry_normalised_columns(db):
    r = next(
        db.query(
            "select count(*) as n, sum(tile_m is not null) as tiles, sum(padding "
            "is not null) as pads, sum(pipeline is not null) as pipes "
            "from instance_keys where op = 'DeviceGemmXdlUniversal' and registration_id is not null"
        )
    )
    assert r["n"] > 1000 and r["tiles"] == r["n"] and r["pipes"] == r["n"] and r["pads"] == r["n"]


def test_a_2024_split_k_log_line_locates(db, schemas):
    name = (
        "GemmXdlSplitKCShuffle_MNKPadding_RRR_B128_Vec8x1x4_32x16x8x8 "
        "LoopScheduler: Default, PipelineVersion: v2, KBatch 2"
    )
    got = name_queries.locate(db, name, schemas)
    assert got["device_op"] == "DeviceGemmXdlSplitKCShuffle" and not got["ambiguous"]
    [e] = got["entries"]
    assert (
        e["file"].startswith("library/src/tensor_operation_instance/gpu/gemm_splitk/")
        and e["template"] == "DeviceGemmXdlSplitKCShuffle"
    )
    assert e["registrations"][0]["bindings"]["GemmSpec"] == "MNKPadding"


def test_one_format_several_device_ops(schemas):
    p = names.parse(
        "DeviceGemmXdlUniversal<MNKPadding, RCR> BlkSize: 256, "
        "BlkTile: 256x256x64, WaveTile: 32x32, WaveMap: 4x4, "
        "VmemReadVec: 8x8, BlkGemmPipelineScheduler: Intrawave, "
        "BlkGemmPipelineVersion: v3, BlkGemmPipelinePrefetchStages: 2, Kpack: 8",
        schemas,
    )
    assert p.schema == "matched" and p.device_op == "DeviceGemm_Xdl_CShuffleV3"
    assert {"DeviceGemm_Xdl_CShuffleV3", "DeviceGemm_Xdl_CShuffleV3_BPreshuffle"} <= set(
        p.device_ops
    ) and p.device_ops[0] == p.device_op
    assert p.fields["BlkGemmPipelineVer"] == "v3" and p.derived == {
        "PrefetchStages": 2,
        "AMmaKStride": 8,
    }


def test_dtype_settles_a_cross_type_ambiguity(db, schemas):
    name = (
        "DeviceGemmXdlUniversal<Default, RCR> BlkSize: 256, BlkTile: "
        "224x256x64, WaveTile: 16x16, WaveMap: 7x8, VmemReadVec: 8x8, "
        "BlkGemmPipelineScheduler: Intrawave, BlkGemmPipelineVersion: "
        "v3, BlkGemmPipelinePrefetchStages: 2, Kpack: 8"
    )
    both = name_queries.locate(db, name, schemas)
    assert both["ambiguous"]
    assert {e["a_dtype"] for e in both["entries"]} >= {"bhalf_t", "half_t"}
    bf16 = name_queries.locate(db, name, schemas, dtype="bf16")
    assert not bf16["ambiguous"] and [(e["file"], e["a_dtype"]) for e in bf16["entries"]] == [
        (HEADER, "bhalf_t")
    ]
