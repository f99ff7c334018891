"""Fault injection: commands run as real processes (`python -m ckkb.cli`), killed with SIGKILL at
named points (ckkb.procs.fault_point, $CKKB_FAULT), run side by side, starved of disk, fed bad
input. Every case checks that nothing stored was lost and that the user saw one clear line."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ckkb import pipeline, sources
from ckkb.kb.build import build
from tests.conftest import FIXTURES, SAMPLES

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.faults)


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e.pop("CKKB_FAULT", None)
    e.pop("CKKB_FAULT_PAUSE", None)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e["COLUMNS"] = "200"
    e.update(extra)
    return e


def ckkb(*args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
    """Run `ckkb ARGS` in a fresh process; assert it never printed a traceback."""
    r = subprocess.run(
        [sys.executable, "-m", "ckkb.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(**extra),
        cwd=ROOT,
    )
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    return r


class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(*args: object) -> Result:
    """`ckkb ARGS` in this process (no interpreter start-up: for the many bad-input cases); an
    exception that escaped the CLI (a traceback for the user) fails the test."""
    from click.testing import CliRunner

    from ckkb.cli import main

    r = CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "200"})
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"traceback for ckkb {args}") from r.exception
    return Result(r.exit_code, r.stdout, r.stderr)


def start(*args: str, **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ckkb.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**extra),
        cwd=ROOT,
    )


def one_line_error(r: subprocess.CompletedProcess | tuple) -> str:
    """The 'ckkb: error: ...' line of a failed command (there is exactly one)."""
    stderr = r.stderr if hasattr(r, "stderr") else r[1]
    errors = [ln for ln in stderr.splitlines() if ln.startswith(("ckkb: error:", "Error:"))]
    assert len(errors) == 1, stderr
    return errors[0]


def count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def stored(db: Path) -> dict[str, int]:
    """What ingests stored: the rows every rebuild and every write must keep."""
    return {
        t: count(db, f"select count(*) from {t}")
        for t in ("races", "race_results", "ingest_files", "harness_results")
    }


def log_copy(tmp: Path, n: int, sample: str = "001.txt") -> Path:
    """A distinct log (its own content hash): a real sample plus a comment line."""
    p = tmp / f"log-{n}.txt"
    p.write_text(f"# copy {n}\n" + (SAMPLES / sample).read_text())
    return p


@pytest.fixture(scope="session")
def built_kb(tmp_path_factory) -> Path:
    """A knowledge base of the fixture trees with one ingested log (built once)."""
    d = tmp_path_factory.mktemp("faults-kb")
    path = d / "kb.db"
    build(
        path,
        {
            "ck": sources.ck_tree(FIXTURES / "ck_mini"),
            "aiter": sources.aiter_tree(FIXTURES / "aiter_mini"),
        },
        jobs=1,
        stages=pipeline.stages(),
    )
    r = ckkb("ingest", "--db", path, SAMPLES / "001.txt")
    assert r.returncode == 0, r.stderr
    return path


@pytest.fixture
def kb(built_kb, tmp_path) -> Path:
    """A private copy of built_kb (and its build cache, so builds are warm)."""
    path = tmp_path / "kb.db"
    shutil.copy(built_kb, path)
    shutil.copy(built_kb.with_name("kb.db.cache"), tmp_path / "kb.db.cache")
    return path


BUILD = ("build", "--ck", FIXTURES / "ck_mini", "--aiter", FIXTURES / "aiter_mini")
