"""Instance lists and device ops of the installed
wheel's CK tree (figures pinned from a real build)."""

from __future__ import annotations

import json

import sqlite_utils

UNIV_HDR = (
    "library/src/tensor_operation_instance/gpu/gemm_universal/device_gemm_xdl_universal_bf16_bf16_bf16/"
    "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn.hpp"
)
PART2 = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances_part2"


def q(db_path, sql, params=()):
    return sqlite_utils.Database(db_path).execute(sql, params).fetchall()


def test_device_ops_with_params(wheel_db):
    ((n, names, with_params),) = q(
        wheel_db,
        "select count(*), count(distinct name), sum(json_array_length(params) > 0) from device_ops",
    )
    # 137 headers, 131 device-op class templates (two of them, the image/column rearrange ops, only
    # through the token fallback: tree-sitter cannot parse their `enable_if<N >= 1 ...>` parameter);
    # three names are defined in two headers each.
    assert (n, names, with_params) == (131, 128, 131)
    ((params,),) = q(
        wheel_db,
        "select params from device_ops where name = 'DeviceGemm_Xdl_CShuffleV3' "
        "and file like '%device_gemm_xdl_cshuffle_v3.hpp'",
    )
    names = [p["name"] for p in json.loads(params)]
    assert names[12:22] == [
        "BlockSize",
        "MPerBlock",
        "NPerBlock",
        "KPerBlock",
        "AK1",
        "BK1",
        "MPerXDL",
        "NPerXDL",
        "MXdlPerWave",
        "NXdlPerWave",
    ]
    assert names[40:42] == ["BlkGemmPipeSched", "BlkGemmPipelineVer"]
    ((params,),) = q(
        wheel_db, "select params from device_ops where name = 'DeviceColumnToImageImpl'"
    )
    assert [p["name"] for p in json.loads(params)][:5] == [
        "NDimSpatial",
        "ImageLayout",
        "InputDataType",
        "OutputDataType",
        "BlockSize",
    ]
    assert json.loads(params)[-1] == {
        "name": "",
        "kind": "value",
        "type": "typename std::enable_if<NDimSpatial >= 1 && NDimSpatial <= 3, bool>::type",
        "default": "false",
    }
    assert (
        q(wheel_db, "select file, line, message from diagnostics where stage = 'ck.templates'")
        == []
    )


def test_part2_tiles_and_comments(wheel_db):
    ((lid, comment, entries, out, line),) = q(
        wheel_db,
        "select id, comment, entries, commented_out, line "
        "from instance_lists where name = ? and file = ?",
        [PART2, UNIV_HDR],
    )
    assert (comment, entries, out) == ("instances not working on gfx950", 5, 1)
    rows = q(
        wheel_db,
        "select status, reason, fields, tile_m, tile_n, tile_k, "
        "xdl_m, xdl_n, pipeline, padding from instances "
        "where list_id = ? order by ordinal",
        [lid],
    )
    tiles = [(r[0], r[3], r[4], r[5]) for r in rows]
    assert tiles == [
        ("active", 256, 256, 32),
        ("active", 256, 256, 32),
        ("commented_out", 256, 256, 32),
        ("active", 224, 256, 64),
        ("active", 256, 224, 64),
        ("active", 256, 192, 64),
    ]
    assert rows[2][1] == "AGPR Spill"
    f224 = json.loads(rows[3][2])
    f256 = json.loads(rows[4][2])
    assert (
        f224["BlockSize"],
        f224["MPerBlock"],
        f224["NPerBlock"],
        f224["KPerBlock"],
        f224["MXdlPerWave"],
        f224["NXdlPerWave"],
    ) == (256, 224, 256, 64, 7, 8)
    assert (
        f256["BlockSize"],
        f256["MPerBlock"],
        f256["NPerBlock"],
        f256["KPerBlock"],
        f256["MXdlPerWave"],
        f256["NXdlPerWave"],
    ) == (256, 256, 224, 64, 8, 7)
    assert (f224["MPerXDL"], f224["NPerXDL"], f224["BlkGemmPipelineVer"]) == (
        16,
        16,
        "BlockGemmPipelineVersion::v3",
    )
    assert f224["GemmSpec"] == "GemmSpec" and rows[3][9] == "GemmSpec"  # bound per registration
    assert (rows[3][6], rows[3][7], rows[3][8]) == (7, 8, "v3")


def test_share_of_entries_named(wheel_db):
    """Entries whose template resolved to a device op and whose argument count fits it."""
    ((total, ok),) = q(
        wheel_db, "select count(*), sum(mapping = 'ok') from instances where dir like '%gemm%'"
    )
    share = ok / total
    print(f"\nGEMM dirs: {ok}/{total} entries named ({share:.2%})")
    assert (
        total == 7884
    )  # entries of lists in directories named *gemm* (commented-out ones included)
    assert share >= 0.99
    ((total_all, ok_all),) = q(wheel_db, "select count(*), sum(mapping = 'ok') from instances")
    print(f"all dirs: {ok_all}/{total_all} entries named ({ok_all / total_all:.2%})")
    assert ok_all / total_all >= 0.98
    # what is not named is reported, one diagnostic per entry, with a line
    ((bad,),) = q(
        wheel_db,
        "select count(*) from instances where mapping != 'ok' and "
        "list_id in (select id from instance_lists where alias_of = '')",
    )
    ((diags,),) = q(
        wheel_db,
        "select count(*) from diagnostics where stage = 'ck.instances' and line > 0 and "
        "(message like 'unknown device-op%' or message like 'entry %' or message like '% takes %')",
    )
    assert diags == bad


def test_universal_gemm_normalised(wheel_db):
    rows = q(
        wheel_db,
        "select count(*), sum(tile_m is null), sum(block_size "
        "is null), count(distinct a_dtype) from instances "
        "where dir = 'gemm_universal' and template = 'DeviceGemm_Xdl_CShuffleV3'",
    )
    n, no_tile, no_block, dtypes = rows[0]
    assert (n, no_tile, no_block) == (450, 0, 0) and dtypes >= 3
    layouts = {
        r[0]
        for r in q(
            wheel_db,
            "select distinct a_layout || b_layout from instances where dir = 'gemm_universal'",
        )
    }
    assert {"RowRow", "RowCol", "ColRow", "ColCol"} <= layouts


def test_guards_and_aliases(wheel_db):
    ((guarded,),) = q(wheel_db, "select count(*) from instances where guard like '%CK_ENABLE_FP8%'")
    assert guarded > 100
    ((aliases, with_entries),) = q(
        wheel_db, "select count(*), sum(entries > 0) from instance_lists where alias_of != ''"
    )
    assert aliases >= 100 and with_entries == aliases
    ((cmake_in,),) = q(wheel_db, "select count(*) from instance_lists where file like '%.in'")
    assert (
        cmake_in == 0
    )  # the wheel's 83 .in templates hold no tuple: they include their lists from headers
