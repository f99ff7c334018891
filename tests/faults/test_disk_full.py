"""Disk full during a build and during an ingest (Seen 7: a traceback), simulated with a file-size
limit (RLIMIT_FSIZE: writes past it fail with EFBIG, as on a full disk) and with an injected
OSError(ENOSPC). One line, a non-zero exit, the old database intact, no temporary file left."""

from __future__ import annotations

import errno
import resource
import signal
import subprocess
import sys

import pytest

from tests.conftest import SAMPLES
from tests.faults.conftest import BUILD, ROOT, env, one_line_error, stored


def _limited(limit: int, *args: object) -> subprocess.CompletedProcess:
    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write, do not kill the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = subprocess.run(
        [sys.executable, "-m", "ckkb.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env(),
        cwd=ROOT,
        preexec_fn=cap,
        timeout=120,
    )
    assert "Traceback" not in r.stderr, r.stderr
    return r


def test_build_on_a_full_disk(kb):
    before = stored(kb)
    size = kb.stat().st_size
    r = _limited(size // 2, *BUILD, "--db", kb, "--force")
    assert r.returncode != 0
    assert "cannot write" in one_line_error(r)
    assert stored(kb) == before and kb.stat().st_size == size
    assert not [p for p in kb.parent.iterdir() if ".tmp-" in p.name]


def test_ingest_on_a_full_disk(kb, tmp_path):
    before = stored(kb)
    size = kb.stat().st_size
    big = tmp_path / "big.txt"  # many races: more new pages than the limit leaves room for
    body = (SAMPLES / "001.txt").read_text()
    big.write_text("".join(f"# run {i}\n{body}" for i in range(60)))
    r = _limited(size + 64 * 1024, "ingest", "--db", kb, big)
    assert r.returncode != 0
    assert "cannot write" in one_line_error(r)
    assert stored(kb) == before
    r = subprocess.run(
        [sys.executable, "-m", "ckkb.cli", "ingest", "--db", str(kb), str(big)],
        capture_output=True,
        text=True,
        env=env(),
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr  # with room again, it goes in whole
    assert stored(kb)["races"] == before["races"] + 60


def test_injected_enospc(kb, monkeypatch, tmp_path):
    """The same through an injected OSError at the rename (the last step of a build)."""
    from click.testing import CliRunner

    from ckkb.cli import main
    from ckkb.kb import atomic

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "_fsync", full)
    before = stored(kb)
    r = CliRunner().invoke(main, [*map(str, BUILD), "--db", str(kb), "--force"])
    assert r.exit_code == 2, r.output
    assert not isinstance(r.exception, OSError)
    assert "No space left on device" in r.stderr and r.stderr.count("ckkb: error:") == 1
    assert stored(kb) == before
    assert not [p for p in kb.parent.iterdir() if ".tmp-" in p.name]


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE semantics")
