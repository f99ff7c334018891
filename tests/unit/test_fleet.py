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
import sqlite3
import stat
import sys
import textwrap
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
        f.write(json.dumps({{"pid": os.getpid(), "ppid": os.getppid(), "M": M, "env": env}}) + "\\n")

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
            time.sleep(30)
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
