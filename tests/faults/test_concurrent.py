"""Writers side by side: concurrent ingests, and ingests during a build (Seen 1: an ingest that
printed "1 races added" was missing from the rebuilt database; others died with "attempt to write
a readonly database"). Every ingest that reports success is in the final database."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.faults.conftest import BUILD, count, log_copy, start, stored


def _reported(proc) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    data = json.loads(out)
    data["stderr"] = err
    return data


def test_concurrent_ingests(kb, tmp_path):
    before = stored(kb)
    logs = [log_copy(tmp_path, n) for n in range(4)]
    procs = [start("ingest", "--db", kb, log, "--json") for log in logs]
    added = sum(_reported(p)["races_added"] for p in procs)
    after = stored(kb)
    assert added == 4  # each copy of 001.txt holds one race (grep -c 'Best Perf' 001.txt: 1)
    assert after["races"] == before["races"] + added
    assert after["ingest_files"] == before["ingest_files"] + 4


def _wait_for(marker: Path, proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the build never reached its fault point"
        time.sleep(0.02)


@pytest.mark.parametrize("adds", [False, True], ids=["rebuild", "adds-a-tree"])
@pytest.mark.parametrize("point", ["build-locking", "build-carried"])
def test_ingest_during_build_is_kept(kb, tmp_path, point, adds):
    """An ingest while the build extracts (before it copies the ingested rows forward) is carried
    into the new file; one while the build holds the lock waits and goes into the new file. A
    build that adds a tree starts from a copy of the old file (`extend`), taken before the
    ingest: the same holds."""
    before = stored(kb)
    if adds:
        copy = tmp_path / "ck-copy"
        shutil.copytree(FIXTURES / "ck_mini", copy)
        args = ["build", "--db", kb, "--ck", f"copy={copy}", "--json"]
    else:
        args = [*BUILD, "--db", kb, "--force"]
    build = start(
        *args,
        CKKB_FAULT_PAUSE=f"{point}=5",  # longer than an ingest takes to reach the lock (loaded)
        CKKB_FAULT_DIR=str(tmp_path),
    )
    _wait_for(tmp_path / point, build)
    ing = start("ingest", "--db", kb, log_copy(tmp_path, 1), "--json")
    reported = _reported(ing)
    out, err = build.communicate(timeout=120)
    assert build.returncode == 0, err
    assert not adds or json.loads(out)["extended"]  # it did start from the old file's copy
    assert reported["races_added"] == 1
    assert stored(kb)["races"] == before["races"] + 1
    if point == "build-carried":  # it waited for the build's lock, and said so in one line
        assert reported["stderr"].count("waiting for pid") == 1, reported["stderr"]


def test_ingest_right_after_the_carry_is_not_lost(kb, tmp_path, monkeypatch):
    """Seen 1, made deterministic: an ingest that lands just after the build copied the ingested
    rows forward (and before its rename) printed success and was lost. Now it waits for the build
    and goes into the new file."""
    from ckkb import pipeline, sources
    from ckkb.kb.build import build, run

    carry = run.carry_ingested
    ingests = []

    def carry_then_ingest(new, old_path):
        out = carry(new, old_path)
        ingests.append(start("ingest", "--db", kb, log_copy(tmp_path, 1), "--json"))
        try:  # let it finish if it can (it could before the lock: then it was lost)
            ingests[0].wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        return out

    monkeypatch.setattr(run, "carry_ingested", carry_then_ingest)
    before = stored(kb)
    trees = {
        "ck": sources.ck_tree(FIXTURES / "ck_mini"),
        "aiter": sources.aiter_tree(FIXTURES / "aiter_mini"),
    }
    build(kb, trees, jobs=1, force=True, stages=pipeline.stages())
    assert _reported(ingests[0])["races_added"] == 1
    assert stored(kb)["races"] == before["races"] + 1


@pytest.mark.slow
def test_ingest_loop_during_build_loop(kb, tmp_path):
    """The reported scenario: `ckkb build --force` twice while ingests loop."""
    before = stored(kb)
    added = 0
    n = 0
    for _ in range(2):
        build = start(*BUILD, "--db", kb, "--force")
        while build.poll() is None:
            n += 1
            added += _reported(start("ingest", "--db", kb, log_copy(tmp_path, n), "--json"))[
                "races_added"
            ]
        _, err = build.communicate()
        assert build.returncode == 0, err
    assert n >= 2
    assert added == n
    after = stored(kb)
    assert after["races"] == before["races"] + added
    assert after["ingest_files"] == before["ingest_files"] + n
    assert count(kb, "select count(distinct path) from ingest_files where path like '%log-%'") == n


def test_two_builds_at_once(kb, tmp_path):
    """Two `ckkb build --force` at once (two people after one `git pull`): both finish, the
    ingested rows are all there, no temporary file is left."""
    before = stored(kb)
    builds = [start(*BUILD, "--db", kb, "--force") for _ in range(2)]
    for b in builds:
        _, err = b.communicate(timeout=180)
        assert b.returncode == 0, err
        assert "Traceback" not in err
    assert stored(kb) == before
    assert not [p for p in kb.parent.iterdir() if ".tmp-" in p.name or "-journal" in p.name]
