"""`kill -9` at named points of `ckkb build` and `ckkb ingest`: the old database stays readable,
nothing stored is lost, the next command cleans up by itself, and no worker outlives its build."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import FIXTURES, SAMPLES
from tests.faults.conftest import BUILD, ckkb, count, env, log_copy, stored

BUILD_POINTS = ["build-locking", "build-carried", "build-before-rename", "build-after-rename"]
INGEST_POINTS = ["ingest-begin", "ingest-rows", "ingest-commit", "ingest-committed"]


def _leftovers(db) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if ".tmp-" in p.name or "-journal" in p.name)


@pytest.mark.parametrize("adds", [False, True], ids=["rebuild", "adds-a-tree"])
@pytest.mark.parametrize("point", BUILD_POINTS)
def test_build_killed(kb, point, adds, tmp_path):
    """A rebuild, and a build that adds a tree (it starts from a copy of the old file)."""
    before = stored(kb)
    if adds:
        copy = tmp_path / "ck-copy"
        shutil.copytree(FIXTURES / "ck_mini", copy)
        r = ckkb("build", "--db", kb, "--ck", f"copy={copy}", CKKB_FAULT=point)
    else:
        r = ckkb(*BUILD, "--db", kb, "--force", CKKB_FAULT=point)
    assert r.returncode == -signal.SIGKILL, r.stderr
    # the old (or, after the rename, the new) database answers, with every ingested row
    assert ckkb("races", "--db", kb, "--json").returncode == 0
    assert stored(kb) == before
    # the next writer removes what the killed build left, and works
    r = ckkb("ingest", "--db", kb, SAMPLES / "002.txt")
    assert r.returncode == 0, r.stderr
    assert _leftovers(kb) == []
    assert stored(kb)["races"] == before["races"] + 1
    if point == "build-before-rename":  # and so does the next build
        assert ckkb(*BUILD, "--db", kb, "--force").returncode == 0
        assert stored(kb)["races"] == before["races"] + 1


def _padded_tree(tmp_path):
    """ck_mini plus 80 copies of one instance file: enough cache misses (>= SERIAL_BELOW) for the
    build to start its worker pool."""
    tree = tmp_path / "ck"
    shutil.copytree(FIXTURES / "ck_mini", tree)
    d = tree / "library/src/tensor_operation_instance/gpu/gemm_universal"
    src = next(d.glob("*/*_comp_default_instance.cpp"))
    for i in range(80):
        shutil.copy(src, src.with_name(f"pad_{i}_instance.cpp"))
    return tree


def _marked(mark: str) -> list[int]:
    """Processes whose environment carries mark."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() in f.read():
                    with open(f"/proc/{pid}/stat") as st:
                        if st.read().split()[2] != "Z":
                            out.append(int(pid))
        except OSError:
            continue
    return out


def test_build_killed_while_workers_extract(kb, tmp_path):
    """Seen 5: `kill -9` of a build left its `<db>.tmp-<pid>` file and worker processes that were
    alive 8 minutes later. Killed from outside here, once its temp file exists (its workers are
    started before that), as a user would."""
    tree = _padded_tree(tmp_path)
    before = stored(kb)
    mark = f"CKKB_TEST_MARK={uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckkb.cli", "build", "--ck", str(tree), "--no-aiter"]
        + ["--db", str(kb), "--force", "--jobs", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(CKKB_TEST_MARK=mark),
    )
    deadline = time.monotonic() + 60
    while not any(".tmp-" in p.name for p in kb.parent.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    assert len(_marked(mark)) == 3  # the build and its two workers
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked(mark) == []  # every worker died with the build
    assert stored(kb) == before
    r = ckkb("ingest", "--db", kb, log_copy(tmp_path, 1))
    assert r.returncode == 0, r.stderr
    assert _leftovers(kb) == []  # the next writer removed the temp file


@pytest.mark.parametrize("point", INGEST_POINTS)
def test_ingest_killed(kb, tmp_path, point):
    before = stored(kb)
    log = log_copy(tmp_path, 7)
    r = ckkb("ingest", "--db", kb, log, CKKB_FAULT=point)
    assert r.returncode == -signal.SIGKILL
    assert stored(kb)["races"] >= before["races"]
    # readers, writers and builds all work at once; the log is stored exactly once
    assert ckkb("races", "--db", kb, "--json").returncode == 0
    r = ckkb("ingest", "--db", kb, log, "--json")
    assert r.returncode == 0, r.stderr
    assert count(kb, f"select count(*) from ingest_files where path = '{log}'") == 1
    after = stored(kb)
    assert after["ingest_files"] == before["ingest_files"] + 1
    assert after["races"] > before["races"]
    assert _leftovers(kb) == []


def _crash_mid_write(db) -> None:
    """A writer killed in the middle of its transaction, with pages already written to the file:
    a hot rollback journal is left (a small page cache forces the spill)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child never returns)
        conn = sqlite3.connect(db)
        conn.execute("pragma cache_size = 1")
        conn.execute("begin immediate")
        for i in range(3000):
            conn.execute(
                "insert into races (id, op, source_file) values (?, 'gemm', ?)",
                [10_000_000 + i, "x" * 200],
            )
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    assert db.with_name(db.name + "-journal").exists()


def test_crashed_writer_locks_nothing(kb, tmp_path):
    """Seen 6: after a crashed ingest, reads and build refused the database ("not a ckkb knowledge
    base", "refusing to overwrite") and the hint sent users to a build that also refused."""
    before = stored(kb)
    _crash_mid_write(kb)
    r = ckkb("races", "--db", kb, "--json")
    assert r.returncode == 0, r.stderr
    assert stored(kb) == before  # the half-written rows are gone, the stored ones are all there
    _crash_mid_write(kb)
    r = ckkb(*BUILD, "--db", kb, "--force")
    assert r.returncode == 0, r.stderr
    assert stored(kb) == before
    _crash_mid_write(kb)
    r = ckkb("ingest", "--db", kb, SAMPLES / "002.txt")
    assert r.returncode == 0, r.stderr
    assert stored(kb)["races"] > before["races"]


def test_build_fsyncs_before_the_rename(kb, monkeypatch):
    """Seen 9: the build wrote with synchronous=off and renamed without an fsync, so a power cut
    after the rename could leave a renamed file whose pages never reached the disk."""
    from ckkb import pipeline, sources
    from ckkb.kb.build import build

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst, **kw):
        events.append(("replace", os.fspath(src)))
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    trees = {"ck": sources.ck_tree(FIXTURES / "ck_mini")}
    build(kb, trees, jobs=1, force=True, stages=pipeline.stages())
    renamed = [path for what, path in events if what == "replace" and ".tmp-" in path]
    assert len(renamed) == 1
    i = events.index(("replace", renamed[0]))
    assert ("fsync", renamed[0]) in events[:i]  # the new file's pages, before the rename
    assert ("fsync", str(kb.parent)) in events[i:]  # and the rename itself, after it
