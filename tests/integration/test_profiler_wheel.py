"""ckProfiler ops and legends read from the CK tree in the installed amd-aiter wheel."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner

from ckkb.cli import main
from ckkb.kb import db as kbdb
from ckkb.kb.ingest import ingest
from ckkb.profiler_cmd import build_command
from ckkb.queries.profiler import load_legend
from tests.conftest import SAMPLES


def _args(db, op):
    return {
        r[0]: (r[1], json.loads(r[2]), r[3], r[4])
        for r in sqlite3.connect(db).execute(
            "select position, name, codes, optional, [default] from "
            "profiler_args where op = ? and position is not null",
            [op],
        )
    }


def test_71_ops_39_gemm(wheel_db):
    r = CliRunner().invoke(main, ["profiler", "ops", "--json", "--db", str(wheel_db)])
    data = json.loads(r.output)
    assert data["count"] == 71 and len(data["ops"]) == 71
    assert data["gemm_family"] == 39
    names = {o["name"] for o in data["ops"]}
    assert {
        "gemm",
        "gemm_universal",
        "gemm_mx",
        "batched_gemm",
        "grouped_gemm",
        "softmax",
        "reduce",
    } <= names
    gemm = next(o for o in data["ops"] if o["name"] == "gemm")
    assert (gemm["description"], gemm["file"], gemm["interfaces"]) == (
        "GEMM",
        "profiler/src/profile_gemm.cpp",
        ["DeviceGemm"],
    )


def test_gemm_legend(wheel_db):
    a = _args(wheel_db, "gemm")
    assert sorted(a) == list(range(1, 16))
    assert a[2] == (
        "data type",
        {"0": "fp32", "1": "fp16", "2": "bf16", "3": "int8", "4": "fp8"},
        0,
        None,
    )
    assert a[3][1]["1"] == "A[m, k] * B[n, k] = C[m, n]"
    assert a[5][1] == {"0": "no init", "1": "integer value", "2": "decimal value"}
    assert [a[p][0] for p in range(8, 14)] == ["M", "N", "K", "StrideA", "StrideB", "StrideC"]
    assert a[14] == ("number of warm-up cycles", {}, 1, "1") and a[15] == (
        "number of iterations",
        {},
        1,
        "10",
    )


def test_gemm_universal_legend_and_quirk(wheel_db):
    a = _args(wheel_db, "gemm_universal")
    assert a[2][1]["7"] == "f8->bf16, comp f8" and a[2][1]["9"] == "bf16@i4"
    assert a[7][1] == {"0": "no", "1": "yes"}
    assert a[14][0] == "split k into mulitiple batch" and a[14][2] == 0
    assert a[17] == ("memory for rotating buffer", {}, 1, "0")
    q = (
        sqlite3.connect(wheel_db)
        .execute("select op, summary, file from profiler_quirks order by op")
        .fetchall()
    )
    assert [x[0] for x in q] == [
        "gemm_universal",
        "gemm_universal_preshuffle",
        "gemm_universal_streamk",
    ]
    assert q[0][1].startswith("when N % 8 != 0 && M % 8 == 0 the op swaps M<->N, StrideA<->StrideB")


def test_gemm_mx_legend(wheel_db):
    a = _args(wheel_db, "gemm_mx")
    assert a[2][1] == {"0": "f4->f16", "1": "fp8->f16", "2": "fp8->bf16"}
    assert a[3][1]["2"] == "A[k, m] * BPreShuff = C[m, n]"
    assert [a[p][2] for p in (10, 11, 14, 17)] == [0, 1, 1, 1]  # argc 11, 14 or 18
    assert a[14] == ("number of kbatch", {}, 1, "1")


def test_seed_commands(wheel_db):
    db = kbdb.open_db(wheel_db, readonly=True)
    c = build_command(
        load_legend(db, "gemm"),
        dtype="bf16",
        layout="mk_nk",
        M=4096,
        N=4096,
        K=4096,
        verify=True,
        init="integer",
        warmup=5,
        iters=20,
        db=db,
    )
    assert (
        " ".join(c.argv) == "ckProfiler gemm 2 1 1 1 0 1 4096 4096 4096 4096 4096 4096 5 20"
        and c.warnings == []
    )
    c = build_command(
        load_legend(db, "gemm"), dtype="bf16", layout="mk_nk", M=4096, N=4096, K=4096, db=db
    )
    assert len(c.warnings) == 3
    c = build_command(
        load_legend(db, "gemm_mx"),
        dtype="f4->f16",
        layout="mk_nk",
        M=4096,
        N=4096,
        K=8192,
        verify=True,
        warmup=5,
        iters=20,
        stride_a=-1,
        stride_b=-1,
        stride_c=-1,
        db=db,
    )
    assert " ".join(c.argv) == "ckProfiler gemm_mx 0 1 1 1 0 1 4096 4096 8192 -1 -1 -1 1 5 20 0"
    r = CliRunner().invoke(
        main,
        [
            "profiler",
            "cmd",
            "gemm",
            "--dtype",
            "bf16",
            "--layout",
            "mk_nk",
            "--m",
            "4096",
            "--n",
            "4096",
            "--k",
            "4096",
            "--verify",
            "--init",
            "integer",
            "--warmup",
            "5",
            "--iters",
            "20",
            "--json",
            "--db",
            str(wheel_db),
        ],
    )
    assert json.loads(r.output) == {
        "argv": "ckProfiler gemm 2 1 1 1 0 1 4096 4096 4096 4096 4096 4096 5 20".split(),
        "warnings": [],
    }


def test_samples_read_through_the_wheel_legends(wheel_db, tmp_path):
    db = tmp_path / "kb.db"
    db.write_bytes(wheel_db.read_bytes())
    s = ingest(db, [SAMPLES / "016.txt", SAMPLES / "001.txt"], arch="gfx942")
    assert s.errors == []
    rows = (
        sqlite3.connect(db)
        .execute(
            "select op, dtype, layout, M, N, K, verification, "
            "init, warmup, iterations from races order by id"
        )
        .fetchall()
    )
    # 016 prints no shape; its command, read through gemm's legend, gives it
    assert rows[0] == ("gemm", "fp16", "mk_kn", 256, 256, 256, 1, 1, 1, 10)
    assert rows[1][:6] == ("gemm", "fp16", "mk_kn", 49152, 3072, 768)
    r = CliRunner().invoke(main, ["races", "--json", "--db", str(db)])
    races = json.loads(r.output)["races"]
    assert [x["timed"] for x in races] == [6, 102]


def test_registered_pool_per_arch(wheel_db, tmp_path):
    """'126 timed' on gfx950 (the seed's MI355X race of gemm
    bf16 mk_nk 4096^3) vs the pool registered there."""
    db = tmp_path / "kb.db"
    db.write_bytes(wheel_db.read_bytes())
    best = (
        "Best Perf for datatype = bf16 ALayout =  RowMajor BLayout "
        "=  ColumnMajor M = 4096 N = 4096 K = 4096 StrideA = 4096 "
        "StrideB = 4096 StrideC = 4096 : 0.251566 ms, 546.334 TFlops, "
        "400.147 GB/s, DeviceGemm_Xdl_CShuffleV2<Default, 256, 256, 256, "
        "32, 8, 8, 32, 32, 4, 4, 8, 8, 1, 1> LoopScheduler: Default, PipelineVersion: v1\n"
    )
    for arch, winner in (
        ("gfx942", best),
        ("gfx950", best.replace("<Default, 256, 256, 256", "<Default, 256, 128, 256")),
    ):
        log = tmp_path / f"{arch}.log"
        log.write_text(
            "# command: ckProfiler gemm 2 1 1 1 0 1 4096 4096 4096 4096 4096 4096 5 20\n" + winner
        )
        ingest(db, [log], arch=arch)
    races = json.loads(CliRunner().invoke(main, ["races", "--json", "--db", str(db)]).output)[
        "races"
    ]
    reg = {r["arch"]: r["registered"] for r in races}
    assert reg["gfx950"] == 126 and reg["gfx942"] > 0
    moves = sqlite3.connect(db).execute("select winner_moved from races_winner_moves").fetchall()
    assert moves == [(1,)]
