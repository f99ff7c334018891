"""The command builder over legends stored from the fixture tree, and the profiler CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ckkb import sources
from ckkb.cli import main
from ckkb.errors import CkkbError
from ckkb.extract.profiler import STAGE
from ckkb.kb import db as kbdb
from ckkb.kb.build import build
from ckkb.kb.ingest import ingest
from ckkb.profiler_cmd import build_command, interpret_argv, split_command
from ckkb.queries.profiler import load_legend

SEED = "ckProfiler gemm 2 1 1 1 0 1 4096 4096 4096 4096 4096 4096 5 20"


@pytest.fixture
def kb(fixtures, tmp_path):
    path = tmp_path / "kb.db"
    build(path, {"ck": sources.ck_tree(fixtures / "ck_mini")}, stages=[STAGE], jobs=1)
    return path


def _cmd(kb, op="gemm", **kw):
    db = kbdb.open_db(kb)
    args = dict(dtype="bf16", layout="mk_nk", M=4096, N=4096, K=4096)
    args.update(kw)
    return build_command(load_legend(db, op), db=db, **args)


def test_seed_command_without_warnings(kb):
    c = _cmd(kb, verify=True, init="integer", warmup=5, iters=20)
    assert " ".join(c.argv) == SEED
    assert c.warnings == []


def test_defaults_warn(kb):
    c = _cmd(kb)
    assert " ".join(c.argv) == "ckProfiler gemm 2 1 0 1 0 1 4096 4096 4096 4096 4096 4096"
    assert [w.split(":")[0].split(" (")[0] for w in c.warnings] == [
        "verification is off on a shape never raced before",
        "warm-up at the default",
        "iterations at the default",
    ]


def test_names_and_codes(kb):
    assert _cmd(kb, layout="MK_NK_MN", verify=True, warmup=5, iters=20).argv == SEED.split()
    assert _cmd(kb, dtype="2", layout="mk_nk", verify=True, warmup=5, iters=20).argv == SEED.split()
    c = _cmd(kb, layout="1", verify=True, warmup=5, iters=20)
    assert c.argv == SEED.split()
    assert c.warnings == [
        "layout given as code 1: for gemm it means 'A[m, k] * B[n, k] "
        "= C[m, n]' (mk_nk); check it matches what your workload issues"
    ]
    c = _cmd(
        kb,
        dtype="fp16",
        layout="km_kn",
        M=128,
        N=256,
        K=64,
        verify=True,
        warmup=5,
        iters=20,
        init="decimal",
    )
    assert c.argv[2:14] == [
        "1",
        "2",
        "1",
        "2",
        "0",
        "1",
        "128",
        "256",
        "64",
        "128",
        "256",
        "256",
    ]  # packed strides for A[k,m], B[k,n]
    with pytest.raises(CkkbError, match="not one of arg2's codes"):
        _cmd(kb, dtype="fp64")
    with pytest.raises(CkkbError, match="not one of arg3's codes"):
        _cmd(kb, layout="nt")
    with pytest.raises(CkkbError, match="unknown ckProfiler op"):
        _cmd(kb, op="gemm_nope")


def test_time_off_and_strides(kb):
    c = _cmd(
        kb,
        verify=True,
        warmup=5,
        iters=20,
        time_kernel=False,
        stride_a=1000,
        stride_b=4096,
        stride_c=8192,
    )
    assert c.argv[7] == "0" and c.argv[11:14] == ["1000", "4096", "8192"]
    assert c.warnings == [
        "StrideA=1000 is inconsistent with layout mk_nk: "
        "A needs a leading dimension of at least 4096",
        "time kernel is off: ckProfiler will print no timings",
    ]


def test_universal_quirk_and_argc_padding(kb):
    c = _cmd(kb, op="gemm_universal", M=4096, N=4100, verify=True, warmup=5, iters=20)
    # argc must be 15 or 18: warm-up and iterations bring the rotating buffer (default 0) along
    assert c.argv == [
        "ckProfiler",
        "gemm_universal",
        "1",
        "1",
        "1",
        "1",
        "0",
        "1",
        "4096",
        "4100",
        "4096",
        "4096",
        "4096",
        "4100",
        "1",
        "5",
        "20",
        "0",
    ]
    (w,) = c.warnings
    assert w.startswith(
        "quirk of gemm_universal (profiler/src/profile_gemm_universal.cpp:47): "
        "when N % 8 != 0 && M % 8 == 0 the op swaps M<->N"
    )
    assert (
        _cmd(kb, op="gemm_universal", M=4100, N=4096, verify=True, warmup=5, iters=20).warnings
        == []
    )
    c = _cmd(kb, op="gemm_universal", verify=True)
    assert (
        len(c.argv) == 15 and c.argv[-1] == "1"
    )  # required split-K defaults to 1, no optional tail


def test_verification_warning_only_for_new_shapes(kb, tmp_path):
    log = tmp_path / "seed.log"
    log.write_text(
        SEED.join(["# command: ", "\n"]) + "Perf: 0.25 ms, 546.3 TFlops, 400.1 GB/s, "
        "DeviceGemm_Xdl_CShuffleV2<Default, 256, 256, 256>\n"
    )
    ingest(kb, [log])
    assert _cmd(kb, warmup=5, iters=20).warnings == []
    assert _cmd(kb, warmup=5, iters=20, M=8192).warnings[0].startswith("verification is off")


def test_interpret_roundtrip(kb):
    db = kbdb.open_db(kb)
    lg = load_legend(db, "gemm_universal")
    c = build_command(
        lg,
        dtype="bf16",
        layout="mk_nk",
        M=4096,
        N=4100,
        K=512,
        verify=True,
        warmup=5,
        iters=20,
        stride_a=600,
        stride_b=700,
    )
    op, args = split_command(" ".join(c.argv) + " | tee out.log")
    v = interpret_argv(lg, args)
    assert op == "gemm_universal"
    # the quirk applies: the race is reported for the swapped problem
    assert (v["dtype"], v["layout"], v["M"], v["N"], v["K"], v["warmup"], v["iters"]) == (
        "bf16",
        "mk_nk",
        4100,
        4096,
        512,
        5,
        20,
    )
    v = interpret_argv(lg, args[:14])  # no optional tail: the legend's defaults, kept apart
    assert ("warmup" in v, v["warmup_default"], v["iters_default"]) == (False, 1, 10)
    assert (v["stride_a"], v["stride_b"]) == (700, 600)
    assert v["quirks"][0].startswith("when N % 8 != 0 && M % 8 == 0")


def test_ingest_uses_the_legend(kb, tmp_path):
    log = tmp_path / "x.log"
    log.write_text(
        "# command: ./ckProfiler gemm 1 1 1 2 0 1 256 512 1024 1024 1024 512 3 50\n"
        "Perf: 0.01 ms, 1.0 TFlops, 1.0 GB/s, DeviceGemmXdl<256, 256, 128, 4>\n"
    )
    ingest(kb, [log])
    db = kbdb.open_db(kb)
    r = next(db.query("select * from races"))
    assert (
        r["op"],
        r["dtype"],
        r["dtype_code"],
        r["layout"],
        r["layout_code"],
        r["M"],
        r["N"],
        r["K"],
    ) == ("gemm", "fp16", 1, "mk_nk", 1, 256, 512, 1024)
    assert (
        r["verification"],
        r["init"],
        r["time_kernel"],
        r["warmup"],
        r["iterations"],
        r["stride_c"],
    ) == (1, 2, 1, 3, 50, 512)
    assert (
        next(db.query("select verified from race_results"))["verified"] == 1
    )  # verification on, no failure printed


def test_cli(kb):
    run = CliRunner().invoke
    r = run(
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
            "--db",
            str(kb),
        ],
    )
    assert r.exit_code == 0 and r.output == SEED + "\n"
    r = run(
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
            "--json",
            "--db",
            str(kb),
        ],
    )
    data = json.loads(r.output)
    assert list(data) == ["argv", "warnings"] and len(data["warnings"]) == 3
    r = run(main, ["profiler", "ops", "--json", "--db", str(kb)])
    ops = json.loads(r.output)
    assert (
        ops["count"] == 3
        and ops["gemm_family"] == 2
        and [o["name"] for o in ops["ops"]] == ["gemm", "gemm_universal", "softmax"]
    )
    r = run(main, ["profiler", "legend", "gemm", "--json", "--db", str(kb)])
    lg = json.loads(r.output)
    assert lg["args"][1]["codes"] == {"0": "fp32", "1": "fp16", "2": "bf16"} and lg[
        "argc_allowed"
    ] == [14, 16]
    r = run(main, ["profiler", "legend", "gemm_universal", "--db", str(kb)])
    assert r.exit_code == 0 and "A[m, k]" in r.output and "swaps M<->N" in r.output
    r = run(
        main,
        [
            "profiler",
            "cmd",
            "nope",
            "--dtype",
            "bf16",
            "--m",
            "1",
            "--n",
            "1",
            "--k",
            "1",
            "--db",
            str(kb),
        ],
    )
    assert (
        r.exit_code == 2
        and "unknown ckProfiler op: nope" in r.output
        and "Traceback" not in r.output
    )
    r = run(
        main,
        [
            "profiler",
            "cmd",
            "softmax",
            "--dtype",
            "fp16",
            "--m",
            "1",
            "--n",
            "1",
            "--k",
            "1",
            "--db",
            str(kb),
        ],
    )
    assert r.exit_code == 2 and "no positional M, N, K" in r.output
