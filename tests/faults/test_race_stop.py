"""`ckkb race` stopped by SIGTERM or SIGINT (Seen 4: ckProfiler, started in its own session, was
left running, reparented to PID 1). Its whole process group is killed, the shapes already finished
stay in the bundle, and the user sees one line saying so."""

from __future__ import annotations

import json
import signal
import stat
import time

import pytest

from tests.conftest import SAMPLES
from tests.faults.conftest import start
from tests.unit.test_runner import STANDIN, _alive


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_race_stopped(kb, tmp_path, sig):
    exe = tmp_path / "fake-ckProfiler"
    exe.write_text(STANDIN.format(samples=str(SAMPLES)))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    child_file = tmp_path / "child.pid"
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K\n49152,3072,768\n2,64,64\n32,64,64\n")  # done, hangs, never run
    out = tmp_path / "race.jsonl"
    proc = start(
        "race", "gemm", "--dtype", "fp16", "--layout", "mk_nk", "--shapes", shapes,
        "--profiler", exe, "--out", out, "--db", kb, "--quiet",
        STANDIN_ARGS=str(tmp_path / "args.txt"),
        STANDIN_CHILD=str(child_file),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not child_file.exists() or not child_file.read_text():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    grandchild = int(child_file.read_text())
    standin = int((tmp_path / "args.txt").read_text().count("\n"))  # two shapes started
    assert standin == 2
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1] == f"ckkb: stopped by {sig.name}; 1 finished shape(s) kept in {out}", err
    # the hanging stand-in's whole group is gone (its `sleep 300` child too)
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    records = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [r["record"] for r in records] == ["bundle", "race_log"]
    assert records[1]["shape"]["M"] == 49152 and records[1]["status"] == "ok"
