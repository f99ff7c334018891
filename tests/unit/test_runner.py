"""`ckkb race` with a stand-in ckProfiler: a Python script, written here, run through exactly the
code path that runs the real binary (argv list, own process group, timeout, streamed output).

By M (argv[8]) it replays a real recorded output from ../shared/ckprofiler_samples/ (M=49152:
001.txt, M=32: 024.txt), crashes with SIGSEGV after some output (M=1), hangs with a child process
(M=2), prints binary garbage and exits 0 (M=3), or exits 3 (M=5).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import textwrap
import time

import pytest
from click.testing import CliRunner

from ckkb import runner, sources
from ckkb.cli import main
from ckkb.errors import CkkbError
from ckkb.extract.profiler import STAGE
from ckkb.kb import db as kbdb
from ckkb.kb.build import build
from ckkb.kb.ingest import ingest
from ckkb.queries.profiler import load_legend
from tests.conftest import SAMPLES

STANDIN = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    import os, signal, subprocess, sys, time
    SAMPLES = {samples!r}
    M = int(sys.argv[8])
    with open(os.environ["STANDIN_ARGS"], "a") as f:
        f.write(" ".join(sys.argv[1:]) + "\\n")

    def replay(name):
        for line in open(os.path.join(SAMPLES, name)):
            if not line.startswith("#"):
                sys.stdout.write(line)
        sys.stdout.flush()

    if M == 1:
        print("a_m_k: dim 2, lengths {{1, 64}}, strides {{64, 1}}", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    elif M == 2:
        print("found 3 instances", flush=True)
        child = subprocess.Popen(["sleep", "300"])
        with open(os.environ["STANDIN_CHILD"], "w") as f:
            f.write(str(child.pid))
        time.sleep(300)
    elif M == 3:
        sys.stdout.buffer.write(bytes(range(256)) * 4 + b"\\n\\xff\\xfe garbage\\n")
    elif M == 5:
        print("c_m_n: dim 2, lengths {{5, 64}}, strides {{64, 1}}")
        print("Gemm: this data_type & layout is not implemented")
        sys.exit(3)
    elif M == 32:
        replay("024.txt")
    else:
        replay("001.txt")
    """
)


@pytest.fixture
def kb(fixtures, tmp_path):
    path = tmp_path / "kb.db"
    build(path, {"ck": sources.ck_tree(fixtures / "ck_mini")}, stages=[STAGE], jobs=1)
    return path


@pytest.fixture
def standin(tmp_path, monkeypatch):
    exe = tmp_path / "fake-ckProfiler"
    exe.write_text(STANDIN.format(samples=str(SAMPLES)))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("STANDIN_ARGS", str(tmp_path / "args.txt"))
    monkeypatch.setenv("STANDIN_CHILD", str(tmp_path / "child.pid"))
    return exe


def _shapes(tmp_path, rows):
    p = tmp_path / "shapes.csv"
    p.write_text("M,N,K\n" + "".join(f"{m},{n},{k}\n" for m, n, k in rows))
    return p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def test_failures_recorded_and_normal_results_stored(kb, standin, tmp_path):
    shapes = runner.read_shapes(
        _shapes(
            tmp_path,
            [
                (49152, 3072, 768),
                (1, 64, 64),
                (2, 64, 64),
                (3, 64, 64),
                (5, 64, 64),
                (49152, 3072, 768),
            ],
        )
    )
    out = tmp_path / "race.jsonl"
    db = kbdb.open_db(kb)
    echoed = []
    t0 = time.monotonic()
    s = runner.race(
        load_legend(db, "gemm"),
        shapes,
        dtype="fp16",
        layout="mk_kn",
        out=out,
        profiler=str(standin),
        timeout=3,
        db=db,
        echo=echoed.append,
        host={"hostname": "h", "gpu": None, "arch": "gfx942", "cu_count": None, "rocm": None},
    )
    assert time.monotonic() - t0 < 60
    assert [(r["M"], r["status"]) for r in s.runs] == [
        (49152, "ok"),
        (1, "crash"),
        (2, "timeout"),
        (3, "garbage"),
        (5, "exit"),
        (49152, "ok"),
    ]
    assert [r["failure"] for r in s.runs[1:5]] == [
        "killed by SIGSEGV",
        "no exit after 3 s; process group killed",
        "exit status 0 but no ckProfiler result line in the output",
        "exit status 3",
    ]
    # the hang's child was in the killed process group
    assert not _alive(int((tmp_path / "child.pid").read_text()))
    # argv: verification on for the first run of each shape only, warm-up/iterations above the
    # defaults
    argvs = (tmp_path / "args.txt").read_text().splitlines()
    assert argvs[0] == "gemm 1 0 1 1 0 1 49152 3072 768 768 3072 3072 5 20"
    assert argvs[5] == "gemm 1 0 0 1 0 1 49152 3072 768 768 3072 3072 5 20"
    # streamed while running
    assert any(line.startswith("Best Perf for datatype = f16") for line in echoed)
    lines = out.read_text().splitlines()
    assert len(lines) == 7 and json.loads(lines[0])["record"] == "bundle"

    summary = ingest(kb, [out])
    assert summary.races_added == 6 and summary.errors == []
    con = sqlite3.connect(kb)
    rows = con.execute(
        "select status, failure, exit_code, M, verification, warmup, iterations, arch, host "
        "from races order by id"
    ).fetchall()
    assert [r[:3] for r in rows] == [
        ("ok", None, 0),
        ("crash", "killed by SIGSEGV", -11),
        ("timeout", "no exit after 3 s; process group killed", -9),
        ("garbage", "exit status 0 but no ckProfiler result line in the output", 0),
        ("exit", "exit status 3", 3),
        ("ok", None, 0),
    ]
    assert [r[3] for r in rows] == [49152, 1, 2, 3, 5, 49152]
    assert rows[0][4:] == (1, 5, 20, "gfx942", "h") and rows[5][4] == 0
    assert con.execute("select count(*) from race_results where race_id = 1").fetchone() == (103,)
    assert con.execute(
        "select count(*) from race_results where race_id = 1 and verified = 1"
    ).fetchone() == (102,)
    assert con.execute("select best_tflops from races where id = 1").fetchone() == (127.579,)
    assert ingest(kb, [out]).races_added == 0
    # raced before with this op, dtype and layout: verification stays off; another dtype is a new
    # shape
    db = kbdb.open_db(kb)
    again = runner.read_shapes(_shapes(tmp_path, [(49152, 3072, 768)]))
    for dtype, verify in (("fp16", "0"), ("bf16", "1")):
        runner.race(
            load_legend(db, "gemm"),
            again,
            dtype=dtype,
            layout="mk_kn",
            out=tmp_path / f"{dtype}.jsonl",
            profiler=str(standin),
            timeout=30,
            db=db,
            host={},
        )
        assert (tmp_path / "args.txt").read_text().splitlines()[-1].split()[3] == verify


def test_runner_killed_mid_bundle_keeps_finished_shapes(kb, standin, tmp_path):
    out = tmp_path / "race.jsonl"
    db = kbdb.open_db(kb)
    runner.race(
        load_legend(db, "gemm"),
        runner.read_shapes(_shapes(tmp_path, [(32, 512, 7168)])),
        dtype="bf16",
        layout="mk_nk",
        out=out,
        profiler=str(standin),
        timeout=30,
        db=db,
        host={},
    )
    with open(out, "a") as f:
        f.write(
            '{"record": "race_log", "op": "gemm", "output": "Perf: 1 ms'
        )  # the runner died while writing
    s = ingest(kb, [out])
    assert s.races_added == 1 and [e["line"] for e in s.errors] == [3]
    r = (
        sqlite3.connect(kb)
        .execute("select M, N, K, dtype, layout, best_ms, status from races")
        .fetchone()
    )
    assert r == (32, 512, 7168, "bf16", "mk_nk", 0.0634091, "ok")


def test_cli_race(kb, standin, tmp_path):
    shapes = _shapes(tmp_path, [(32, 512, 7168), (5, 64, 64)])
    out = tmp_path / "b.jsonl"
    r = CliRunner().invoke(
        main,
        [
            "race",
            "gemm",
            "--dtype",
            "bf16",
            "--layout",
            "mk_nk",
            "--shapes",
            str(shapes),
            "--profiler",
            str(standin),
            "--timeout",
            "20",
            "--out",
            str(out),
            "--ingest",
            "--json",
            "--db",
            str(kb),
        ],
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [x["status"] for x in data["runs"]] == ["ok", "exit"]
    assert data["ingest"] == {"races_added": 2, "results_added": 0, "errors": []}


def test_bad_inputs(kb, tmp_path, standin):
    db = kbdb.open_db(kb)
    lg = load_legend(db, "gemm")
    with pytest.raises(CkkbError, match="ckProfiler not found"):
        runner.race(
            lg,
            [runner.Shape(1, 1, 1)],
            dtype="fp16",
            layout="mk_kn",
            out=tmp_path / "o",
            profiler=str(tmp_path / "nope"),
        )
    with pytest.raises(CkkbError, match="not on PATH"):
        runner.race(
            lg,
            [runner.Shape(1, 1, 1)],
            dtype="fp16",
            layout="mk_kn",
            out=tmp_path / "o",
            profiler="no-such-ckprofiler-xyz",
        )
    bad = tmp_path / "bad.csv"
    bad.write_text("M,N,K\n1,2,3\n4,x,6\n")
    with pytest.raises(CkkbError, match=r"bad.csv:3: not a shape"):
        runner.read_shapes(bad)
    bad.write_text("A,B\n1,2\n")
    with pytest.raises(CkkbError, match="no M column"):
        runner.read_shapes(bad)
    with pytest.raises(CkkbError, match="not one of arg2's codes"):
        runner.race(
            lg,
            [runner.Shape(1, 1, 1)],
            dtype="fp99",
            layout="mk_kn",
            out=tmp_path / "o",
            profiler=str(standin),
        )
    assert not (tmp_path / "o").exists()  # nothing ran, nothing written


def test_rocminfo_parsing():
    text = textwrap.dedent(
        """\
        *******
        Agent 1
        *******
          Name:                    AMD EPYC 9654
          Device Type:             CPU
          Compute Unit:            192
        *******
        Agent 2
        *******
          Name:                    gfx942
          Marketing Name:          AMD Instinct MI300X
          Device Type:             GPU
          Compute Unit:            304
        """
    )
    assert runner.parse_rocminfo(text) == {
        "arch": "gfx942",
        "gpu": "AMD Instinct MI300X",
        "cu_count": 304,
    }
    facts = runner.host_facts()
    assert set(facts) >= {"hostname", "gpu", "arch", "cu_count", "rocm"}
