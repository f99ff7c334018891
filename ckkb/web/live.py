"""Serving a knowledge base that changes: ingests commit into it, builds rename a new file over it.

Datasette's immutable mode (`-i`) promises SQLite the file never changes; an ingest into it then
answered "database disk image is malformed" until a restart. `LiveDatabase` instead:

- opens read-only connections (`mode=ro`) that take SQLite's shared lock per query, so a query sees
  the database before an ingest's commit or after it, never half of it, and waits (busy timeout)
  for the moment of the commit instead of failing;
- notices a build's rename (the path names another inode, or was written since: one stat per
  query) and reopens that thread's connection on the new file;
- bounds every query: Datasette's time limit (a progress handler; for ckkb's own canned queries,
  trusted SQL that takes milliseconds, CANNED_LIMIT_MS instead: under 50 clients on a busy machine
  a canned query can wait past the 1 s meant for arbitrary SQL), plus a per-connection cap on the
  size of any string or blob (SQLITE_LIMIT_LENGTH), which stops single expensive calls such as
  `replace(hex(zeroblob(...)))` that no progress handler interrupts, and a process-wide heap
  limit (`PRAGMA hard_heap_limit`);
- rows: Datasette's max_returned_rows caps every page, and CSV streaming of whole tables is off.

Immutable mode stays available (`ckkb serve --immutable`) for a file nothing writes to.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import sqlite3
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from datasette.database import Database, connections

from ckkb.kb import lock

MAX_VALUE_BYTES = 32 << 20  # largest string or blob a query may make
HEAP_LIMIT_BYTES = 2 << 30  # the whole server's SQLite heap
BUSY_TIMEOUT_MS = 10_000
CANNED_LIMIT_MS = 10_000

_canned = contextvars.ContextVar("ckkb_canned_query", default=False)


# Package data, read once per process (module state on purpose): it never changes while serving.
@cache
def _canned_sql() -> frozenset[str]:
    from ckkb.web.metadata import canned_queries, served_sql  # noqa: PLC0415

    return frozenset(served_sql(q).strip() for q in canned_queries().values())


class _Conn(sqlite3.Connection):
    ident: tuple[int, int] = (0, 0)

    def set_progress_handler(self, handler: Callable[[], int | None] | None, n: int) -> None:
        """Datasette's time limit, except for a canned query: CANNED_LIMIT_MS from now."""
        if handler is not None and _canned.get():
            deadline = time.monotonic() + CANNED_LIMIT_MS / 1000
            handler = lambda: int(time.monotonic() > deadline)  # noqa: E731
        super().set_progress_handler(handler, n)


def file_ident(path: str | Path) -> tuple[int, int]:
    """(device, inode) of the file a path names now; (0, 0) when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0)
    return (st.st_dev, st.st_ino)


def limit(conn: sqlite3.Connection) -> None:
    """The per-connection bounds (see the module docstring)."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.execute(f"pragma busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute(f"pragma hard_heap_limit = {HEAP_LIMIT_BYTES}")


class LiveDatabase(Database):
    """A Datasette database over a file that ingests and builds may change (module docstring)."""

    def __init__(self, ds: Any, path: str | Path) -> None:
        super().__init__(ds, path=str(path), is_mutable=True)

    def connect(self, write: bool = False) -> _Conn:
        if write:
            raise sqlite3.OperationalError("ckkb serve is read-only")
        ident = file_ident(self.path)
        conn = sqlite3.connect(
            f"file:{self.path}?mode=ro",
            uri=True,
            check_same_thread=False,
            factory=_Conn,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
        conn.ident = ident
        limit(conn)
        old: list[sqlite3.Connection] = self._all_file_connections  # type: ignore[has-type]
        kept = [c for c in old if _open(c)]
        self._all_file_connections = kept + [conn]
        return conn

    def _forget(self) -> None:
        """Drop what the plugin keeps per served file on this object (`_ckkb_*`: form choices,
        directory names): a build replaced the file."""
        for name in [n for n in vars(self) if n.startswith("_ckkb_")]:
            delattr(self, name)

    def _fresh(self) -> _Conn:
        conn = self.connect()
        self.ds._prepare_connection(conn, self.name)
        setattr(connections, self.name, conn)
        return conn

    async def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        token = _canned.set(sql.strip() in _canned_sql())
        try:
            return await super().execute(sql, *args, **kwargs)
        finally:
            _canned.reset(token)

    async def execute_fn(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        if self.ds.executor is None:
            return await super().execute_fn(fn)

        def in_thread() -> Any:
            conn: _Conn | None = getattr(connections, self.name, None)
            if conn is None or conn.ident != file_ident(self.path):
                if conn is not None:
                    conn.close()
                    self._forget()
                conn = self._fresh()
            for attempt in range(3):
                try:
                    return fn(conn)
                except sqlite3.OperationalError as e:
                    # a writer killed mid-commit (hot journal), or a rename between the check
                    # above and the query: recover, reopen, and answer again
                    hot = e.sqlite_errorname == "SQLITE_READONLY_ROLLBACK"
                    if attempt == 2 or (not hot and conn.ident == file_ident(self.path)):
                        raise
                    lock.recover(self.path)
                    conn.close()
                    conn = self._fresh()

        ctx = contextvars.copy_context()  # carries _canned into the SQL thread
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.ds.executor, ctx.run, in_thread)


def _open(conn: sqlite3.Connection) -> bool:
    try:
        conn.total_changes  # noqa: B018  (raises on a closed connection)
    except sqlite3.ProgrammingError:
        return False
    return True
