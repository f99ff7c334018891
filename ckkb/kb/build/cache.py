"""The build's content-hash cache: one sqlite file beside the database.

(stage, version, root, rel) -> size, mtime, sha256 and the pickled FileResult, so a rebuild only
re-extracts files whose bytes changed; and what a build derived from several files of a tree
(`derived`: the include directories read from its CMake). It is the only cache ckkb keeps.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from ckkb.kb.stages import Stage

CacheRow = tuple[str, str, str, str, int, int, str, bytes]  # stage, version, root, rel, size, ...

_SCHEMA = (
    "create table if not exists files (stage text, version text, root text, rel text, size int, "
    "mtime int, sha text, blob blob, primary key (stage, root, rel))",
    "create table if not exists meta (key text primary key, value text)",
    # what a build derived from several files of a tree (`DerivedStore`), checked by its user
    "create table if not exists derived (key text, root text, blob blob, primary key (key, root))",
)


class Cache:
    """Cached per-file results; a corrupt cache file is deleted and started again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.conn = self._open()
        except sqlite3.DatabaseError:
            path.unlink(missing_ok=True)  # a corrupt cache is only a cache
            self.conn = self._open()

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path)
        for sql in _SCHEMA:
            conn.execute(sql)
        return conn

    def load(self, stage: Stage, root: str) -> dict[str, tuple[int, int, str]]:
        """rel -> (size, mtime_ns, sha256) of each cached result of this stage version."""
        cur = self.conn.execute(
            "select rel, size, mtime, sha from files where stage=? and version=? and root=?",
            (stage.name, stage.version, root),
        )
        return {r[0]: (r[1], r[2], r[3]) for r in cur}

    def other_roots(self, stage: Stage, root: str) -> dict[str, dict[tuple[int, str], str]]:
        """rel -> {(size, sha256): root} of this stage version's results for other trees."""
        out: dict[str, dict[tuple[int, str], str]] = {}
        cur = self.conn.execute(
            "select rel, root, size, sha from files where stage=? and version=? and root!=?",
            (stage.name, stage.version, root),
        )
        for rel, other, size, sha in cur:
            out.setdefault(rel, {})[(size, sha)] = other
        return out

    def blob(self, stage: Stage, root: str, rel: str) -> bytes | None:
        row = self.conn.execute(
            "select blob from files where stage=? and version=? and root=? and rel=?",
            (stage.name, stage.version, root, rel),
        ).fetchone()
        return row[0] if row else None

    def blobs(self, stage: Stage, root: str) -> dict[str, bytes]:
        cur = self.conn.execute(
            "select rel, blob from files where stage=? and version=? and root=?",
            (stage.name, stage.version, root),
        )
        return dict(cur)

    def store(self, rows: Iterable[CacheRow]) -> None:
        with self.conn:
            self.conn.executemany("insert or replace into files values (?,?,?,?,?,?,?,?)", rows)

    def prune(self, stage: Stage, root: str, keep: set[str]) -> None:
        """Forget this stage's files under `root` that the tree no longer has."""
        sql = "select rel from files where stage=? and root=?"
        cur = self.conn.execute(sql, (stage.name, root))
        gone = [(stage.name, root, r[0]) for r in cur if r[0] not in keep]
        if gone:
            with self.conn:
                self.conn.executemany("delete from files where stage=? and root=? and rel=?", gone)

    def recall(self, key: str, root: str) -> bytes | None:
        """What `remember` kept for (key, root); None when nothing."""
        sql = "select blob from derived where key=? and root=?"
        row = self.conn.execute(sql, (key, root)).fetchone()
        return row[0] if row else None

    def remember(self, key: str, root: str, blob: bytes) -> None:
        with self.conn:
            self.conn.execute("insert or replace into derived values (?,?,?)", (key, root, blob))

    def close(self) -> None:
        self.conn.close()
