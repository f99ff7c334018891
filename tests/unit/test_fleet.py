"""`ckkb race --gpus/--scheduler` on a Dask cluster of 2 CPU workers, each claiming a fake GPU=1,
with a stand-in ckProfiler that replays ../shared/ckprofiler_samples/ (as in test_runner.py).

The two fake GPUs are a kfd topology written under tmp (CKKB_KFD_ROOT), so `--gpus` goes through
the same discovery and pinning as on a ROCm host. The stand-in logs every start (its pid, its
parent, the pinning variables it saw, M) to STANDIN_LOG: the counts the tests check come from that
log, a second record written apart from the bundle. By M it:
  7: kills its parent (the Dask worker) the first time, replays the sample after;
  1: crashes with SIGSEGV, always;
  2: starts a child and sleeps (for SIGINT);
  32: replays 024.txt; anything else: 001.txt.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckkb import sources
from ckkb.cli import main
from ckkb.extract.profiler import STAGE
from ckkb.kb.build import build
from ckkb.kb.ingest import ingest
from tests.conftest import SAMPLES

pytestmark = pytest.mark.slow

distributed = pytest.importorskip("distributed")

STANDIN = textwrap.dedent(
    """\
    #!{python}
    import json, os, signal, subprocess, sys, time
    SAMPLES = {samples!r}
    M = int(sys.argv[8])
    env = {{k: os.environ.get(k) for k in
           ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CKKB_FLEET_GPU")}}
    with open(os.environ["STANDIN_LOG"], "a") as f:
        rec = {{"pid": os.getpid(), "ppid": os.getppid(), "M": M, "env": env}}
        f.write(json.dumps(rec) + "\\n")

    def replay(name):
        for line in open(os.path.join(SAMPLES, name)):
            if not line.startswith("#"):
                sys.stdout.write(line)
        sys.stdout.flush()

    time.sleep(0.2)
    if M == 7:
        marker = os.environ["STANDIN_LOG"] + ".killed"
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getppid(), signal.SIGKILL)
            os._exit(1)
        replay("001.txt")
    elif M == 1:
        print("a_m_k: dim 2, lengths {{1, 64}}, strides {{64, 1}}", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    elif M == 2:
        child = subprocess.Popen(["sleep", "300"])
        with open(os.environ["STANDIN_LOG"], "a") as f:
            f.write(json.dumps({{"pid": child.pid, "ppid": os.getpid(), "M": -2}}) + "\\n")
        time.sleep(300)
    elif M == 32:
        replay("024.txt")
    else:
        replay("001.txt")
    """
)

GPU_PROPS = """cpu_cores_count 0
simd_count {simd}
simd_per_cu 4
gfx_target_version 90402
max_engine_clk_fcompute 2100
location_id {loc}
domain 0
unique_id {uid}
"""


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    path = tmp_path_factory.mktemp("kb") / "kb.db"
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    build(path, {"ck": sources.ck_tree(fixtures / "ck_mini")}, stages=[STAGE], jobs=1)
    return path


@pytest.fixture
def fleet_env(tmp_path, monkeypatch):
    """Two fake GPUs (kfd topology), the stand-in, its log."""
    nodes = tmp_path / "kfd"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0" / "properties").write_text("cpu_cores_count 16\nsimd_count 0\n")
    for i, (loc, uid) in enumerate(((0x0300, 0xAAA1), (0x2300, 0xBBB2)), start=1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(GPU_PROPS.format(simd=1216, loc=loc, uid=uid))
    exe = tmp_path / "fake-ckProfiler"
    exe.write_text(STANDIN.format(python=sys.executable, samples=str(SAMPLES)))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "standin.jsonl"
    monkeypatch.setenv("CKKB_KFD_ROOT", str(nodes))
    monkeypatch.setenv("STANDIN_LOG", str(log))
    return exe, log


def _shapes(tmp_path: Path, ms: list[int]) -> Path:
    p = tmp_path / "shapes.csv"
    p.write_text("M,N,K\n" + "".join(f"{m},3072,768\n" for m in ms))
    return p


def _race(kb, exe, shapes, out, *extra) -> tuple[int, str]:
    args = ["race", "gemm", "--dtype", "fp16", "--layout", "mk_kn", "--shapes", str(shapes)]
    args += ["--profiler", str(exe), "--db", str(kb), "--out", str(out), "--timeout", "60"]
    res = CliRunner().invoke(main, [*args, *extra, "--json"])
    return res.exit_code, res.output


def _log(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _records(bundle: Path) -> list[dict]:
    return [json.loads(x) for x in bundle.read_text().splitlines()[1:]]


def _results(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    rows = con.execute(
        "select r.M, r.N, r.K, x.name, x.tflops, x.ms, x.verified from race_results x "
        "join races r on r.id = x.race_id order by 1, 2, 3, 4, 5"
    ).fetchall()
    con.close()
    return rows


def test_every_shape_once_pinned_and_equal_to_serial(kb, fleet_env, tmp_path):
    exe, log = fleet_env
    ms = [49152, 32, 64, 128, 256, 512]
    shapes = _shapes(tmp_path, ms)
    out = tmp_path / "fleet.jsonl"
    code, output = _race(kb, exe, shapes, out, "--gpus", "0,1")
    assert code == 0, output
    starts = _log(log)
    # every shape timed exactly once (the stand-in's own log)
    assert sorted(s["M"] for s in starts) == sorted(ms)
    recs = _records(out)
    assert sorted(r["shape"]["M"] for r in recs) == sorted(ms)
    assert {r["status"] for r in recs} == {"ok"}
    # each worker's child saw its own pinned device, and the record says which
    seen = {(s["env"]["ROCR_VISIBLE_DEVICES"], s["env"]["HIP_VISIBLE_DEVICES"]) for s in starts}
    assert seen == {("0", "0"), ("1", "0")}
    for s in starts:
        rec = next(r for r in recs if r["shape"]["M"] == s["M"])
        assert str(rec["host"]["gpu_index"]) == s["env"]["ROCR_VISIBLE_DEVICES"]
        assert rec["host"]["uuid"] == (
            "000000000000aaa1" if rec["host"]["gpu_index"] == 0 else "000000000000bbb2"
        )
        assert rec["host"]["pci_bus"] == (
            "0000:03:00.0" if rec["host"]["gpu_index"] == 0 else "0000:23:00.0"
        )
        assert rec["host"]["arch"] == "gfx942" and rec["host"]["cu_count"] == 304
        assert rec["host"]["ckkb"] and rec["key"].count("|") >= 5
    # the results equal a serial run's
    serial = tmp_path / "serial.jsonl"
    code, output = _race(kb, exe, shapes, serial)
    assert code == 0, output
    db_f, db_s = tmp_path / "f.db", tmp_path / "s.db"
    for db, b in ((db_f, out), (db_s, serial)):
        db.write_bytes(Path(kb).read_bytes())
        assert ingest(db, [b]).races_added == len(ms)
    assert _results(db_f) == _results(db_s) and len(_results(db_f)) > 100


def test_worker_killed_mid_shape_is_requeued(kb, fleet_env, tmp_path):
    exe, log = fleet_env
    ms = [49152, 7, 64, 128]
    out = tmp_path / "fleet.jsonl"
    code, output = _race(kb, exe, _shapes(tmp_path, ms), out, "--gpus", "0,1")
    assert code == 0, output
    starts = [s["M"] for s in _log(log)]
    # M=7 started twice (its first worker was killed), every other shape once
    assert sorted(starts) == sorted([*ms, 7])
    recs = _records(out)
    assert sorted(r["shape"]["M"] for r in recs) == sorted(ms)
    assert {r["status"] for r in recs} == {"ok"}


def test_profiler_that_always_crashes_is_failed_after_three_tries(kb, fleet_env, tmp_path):
    exe, log = fleet_env
    out = tmp_path / "fleet.jsonl"
    code, output = _race(kb, exe, _shapes(tmp_path, [1, 49152]), out, "--gpus", "0,1")
    assert code == 0, output
    assert sorted(s["M"] for s in _log(log)) == [1, 1, 1, 49152]
    recs = {r["shape"]["M"]: r for r in _records(out)}
    assert len(_records(out)) == 2
    assert recs[1]["status"] == "crash" and recs[1]["attempts"] == 3
    assert recs[1]["failure"] == "profiler crashed 3 times; last: killed by SIGSEGV"
    assert recs[49152]["status"] == "ok"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("to", ["driver", "group"])
def test_sigint_leaves_no_child_process(kb, fleet_env, tmp_path, to):
    """SIGINT to the driver alone, and to its whole process group (Ctrl-C in a terminal, which
    the local workers receive too)."""
    exe, log = fleet_env
    out = tmp_path / "fleet.jsonl"
    argv = [sys.executable, "-m", "ckkb", "race", "gemm", "--dtype", "fp16", "--layout", "mk_kn"]
    argv += ["--shapes", str(_shapes(tmp_path, [2, 2, 49152])), "--profiler", str(exe)]
    argv += ["--db", str(kb), "--out", str(out), "--gpus", "all", "--quiet"]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        entries = _log(log)
        if sum(1 for e in entries if e["M"] == -2) == 2:
            break
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the two stand-ins never started")
    if to == "group":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the driver did not stop on SIGINT")
    text = proc.stdout.read().decode() if proc.stdout else ""
    assert rc == 130, text
    assert "Traceback" not in text
    pids = [e["pid"] for e in _log(log)] + [e["ppid"] for e in _log(log) if e["M"] == 2]
    time.sleep(1.0)
    assert [p for p in pids if _alive(p)] == []
    # what had finished is in the bundle, which stays valid: header and whole records only
    for line in out.read_text().splitlines():
        json.loads(line)


def test_partial_bundle_ingests_and_merged_bundle_adds_nothing(kb, fleet_env, tmp_path):
    exe, _ = fleet_env
    out = tmp_path / "fleet.jsonl"
    code, output = _race(kb, exe, _shapes(tmp_path, [49152, 32, 64]), out, "--gpus", "2")
    assert code == 0, output
    lines = out.read_text().splitlines(keepends=True)
    assert len(lines) == 4
    partial = tmp_path / "partial.jsonl"  # a run killed while writing its third record
    partial.write_text(lines[0] + lines[1] + lines[2][: len(lines[2]) // 2])
    db = tmp_path / "kb.db"
    db.write_bytes(Path(kb).read_bytes())
    first = ingest(db, [partial])
    assert first.races_added == 1
    assert len(first.errors) == 1 and first.errors[0]["line"] == 3
    whole = ingest(db, [out])
    assert (whole.races_added, whole.duplicates, whole.errors) == (2, 1, [])
    merged = tmp_path / "merged.jsonl"
    merged.write_text("".join(lines) + "".join(lines[1:]))
    again = ingest(db, [merged])
    assert (again.races_added, again.results_added, again.duplicates) == (0, 0, 6)
    assert again.errors == []  # all stored before: nothing to say


def test_scheduler_address_with_a_local_cluster(kb, fleet_env, tmp_path):
    from distributed import LocalCluster

    exe, log = fleet_env
    ms = [49152, 32, 64, 128]
    out = tmp_path / "fleet.jsonl"
    with LocalCluster(
        n_workers=2, threads_per_worker=1, resources={"GPU": 1}, dashboard_address=None
    ) as cluster:
        code, output = _race(
            kb, exe, _shapes(tmp_path, ms), out, "--scheduler", cluster.scheduler_address
        )
    assert code == 0, output
    assert sorted(s["M"] for s in _log(log)) == sorted(ms)
    recs = _records(out)
    assert sorted(r["shape"]["M"] for r in recs) == sorted(ms)
    assert len({r["task"]["pid"] for r in recs}) == 2  # both workers took shapes
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        code, output = _race(
            kb,
            exe,
            _shapes(tmp_path, ms),
            tmp_path / "x.jsonl",
            "--scheduler",
            cluster.scheduler_address,
        )
    assert code == 2
    assert "no worker offers the resource GPU" in output


def test_without_dask_one_line_says_what_to_install(kb, fleet_env, tmp_path, monkeypatch):
    exe, _ = fleet_env
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, output = _race(kb, exe, _shapes(tmp_path, [64]), tmp_path / "x.jsonl", "--gpus", "all")
    assert code == 2
    lines = [x for x in output.splitlines() if x.strip()]
    assert lines == [
        "ckkb: error: --gpus and --scheduler need Dask: pip install 'ckkb[fleet]' "
        "(dask[distributed])"
    ]


def fake_harness_shape(job: dict) -> dict:
    """A CPU stand-in for ckkb.fleet.tasks.harness_shape: one record per shape and pass; M=13
    always raises (an infrastructure error, as a lost CUDA context would)."""
    s = job["shape"]
    if s.M == 13:
        raise RuntimeError("stand-in failure")
    t0 = time.time()
    rec = {
        "record": "harness_results",
        "M": s.M,
        "pass_no": job["pass_no"],
        "key": f"{job['run_id']}|#{job['index']}|{job['pass_no']}",
    }
    return {"records": [rec], "task": {"start": t0, "end": time.time(), "worker": os.getpid()}}


def test_harness_jobs_pass_order_and_failed_shape(tmp_path, monkeypatch):
    from distributed import LocalCluster

    from ckkb.fleet import jobs
    from ckkb.harness.timing import Shape

    shapes = [Shape(m, 64, 64) for m in (16, 13, 32, 48)]
    js = jobs.harness_jobs(shapes, 2, run_id="r", token="t")
    for j in js:
        j.fn = fake_harness_shape
    out = tmp_path / "h.jsonl"
    header = {"record": "bundle", "kind": "harness"}
    with LocalCluster(
        n_workers=1, threads_per_worker=1, resources={"GPU": 1}, dashboard_address=None
    ) as cluster:
        res = jobs.run_jobs(js, out, header, scheduler=cluster.scheduler_address)
    recs = _records(out)
    ok = [r for r in recs if "extra" not in r]
    # one worker: every shape of pass 1 ran before any of pass 2
    by_start = sorted(ok, key=lambda r: r["task"]["start"])
    assert [(r["pass_no"], r["M"]) for r in by_start] == [
        (1, 16),
        (1, 32),
        (1, 48),
        (2, 16),
        (2, 32),
        (2, 48),
    ]
    failed = [r for r in recs if "extra" in r]
    # M=13 failed in both passes: one error row per candidate and regime, with the cause
    assert res.failed == 2 and {r["M"] for r in failed} == {13}
    assert {r["status"] for r in failed} == {"error"}
    assert {r["extra"]["note"] for r in failed} == {"RuntimeError: stand-in failure"}
    assert len({r["key"] for r in recs}) == len(recs)


def test_harness_gpus_without_torch_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    shapes = tmp_path / "s.csv"
    shapes.write_text("M,N,K\n64,64,64\n")
    res = CliRunner().invoke(
        main, ["harness", "--shapes", str(shapes), "--gpus", "all", "--out", str(tmp_path / "h")]
    )
    assert res.exit_code == 3
    assert res.output.splitlines()[0] == (
        "ckkb: error: torch is not installed: the harness times GEMMs through torch"
    )
