"""The writer's sqlite3 adapters (None, bool) bind what sqlite3 binds without them."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

QUERY = "select typeof(?), typeof(?), typeof(?), ?, ?, ? is null"


def test_adapters_bind_null_and_integers() -> None:
    import ckkb.kb.build.writer  # noqa: F401  (registers the adapters)

    got = sqlite3.connect(":memory:").execute(QUERY, (None, True, False, True, False, None))
    # without adapters, in a fresh interpreter: the reference
    ref = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3; print(list(sqlite3.connect(':memory:').execute("
            f"{QUERY!r}, (None, True, False, True, False, None)).fetchone()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    row = got.fetchone()
    assert row == ("null", "integer", "integer", 1, 0, 1)
    assert str(list(row)) == ref
