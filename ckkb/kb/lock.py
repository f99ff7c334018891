"""One writer at a time per knowledge base, and recovery from writers that died.

- The writer lock is `flock` on `<db>.lock` beside the database (the link's target when `--db` is a
  symlink, so two names of one file share one lock). The kernel drops it when its holder dies, even
  by `kill -9`: a lock is never stale. `ckkb ingest` holds it for its whole transaction;
  `ckkb build` from the moment it copies the ingested rows forward until its rename, so an ingest
  is either in the old file before the copy (and carried into the new one) or waits and goes into
  the new file. Readers never take it.
- A waiting writer says once, on stderr, who holds the lock; it gives up after `CKKB_LOCK_TIMEOUT`
  seconds (default 600) with one line.
- `recover(db)`: a writer killed mid-transaction leaves a hot rollback journal, which read-only
  connections cannot roll back ("attempt to write a readonly database"). Whoever finds one while
  no writer holds the lock rolls it back (one read-write open), so the next command of any kind
  works. `clean_temp(db)` removes `<db>.tmp-<pid>` files of builds whose process is gone.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import re
import sqlite3
import sys
import time
from pathlib import Path
from types import TracebackType

from ckkb.errors import CkkbError

DEFAULT_TIMEOUT = 600.0
BUSY_TIMEOUT_MS = 30_000  # how long a connection waits for another's commit (sqlite busy handler)
_TMP = re.compile(r"\.tmp-(\d+)$")


def real_path(db_path: str | Path) -> Path:
    """The file a knowledge-base path names: symlinks resolved, so the rename replaces the link's
    target and the link stays a link."""
    return Path(os.path.realpath(db_path))


def lock_path(db_path: str | Path) -> Path:
    real = real_path(db_path)
    return real.with_name(real.name + ".lock")


def timeout_from_env() -> float:
    raw = os.environ.get("CKKB_LOCK_TIMEOUT")
    if raw is None or raw == "":
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise CkkbError(
            f"CKKB_LOCK_TIMEOUT={raw!r}: expected a finite number of seconds >= 0",
            hint="e.g. CKKB_LOCK_TIMEOUT=600",
        )
    return value


class WriterLock:
    """A held writer lock; release() (or leaving the `with`) lets the next writer in."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    def release(self) -> None:
        if self.fd >= 0:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = -1

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return text or "another ckkb process"


def acquire(
    db_path: str | Path, what: str, timeout: float | None = None, *, quiet: bool = False
) -> WriterLock:
    """Take the writer lock of the knowledge base at db_path, waiting for the current writer."""
    path = lock_path(db_path)
    wait = timeout_from_env() if timeout is None else timeout
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise CkkbError(
            f"cannot open the writer lock {path}: {e.strerror or e}",
            hint="the folder of the knowledge base must be writable to change it",
        ) from None
    deadline = time.monotonic() + wait
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise CkkbError(f"cannot lock {path}: {e.strerror or e}") from None
        if time.monotonic() >= deadline:
            holder = _holder(fd)
            os.close(fd)
            raise CkkbError(
                f"{db_path} is being written by {holder}; gave up after {wait:g} s",
                hint="retry when it is done, or raise CKKB_LOCK_TIMEOUT (seconds)",
            )
        if not said and not quiet:
            sys.stderr.write(f"ckkb: waiting for {_holder(fd)} to finish writing {db_path}\n")
            sys.stderr.flush()
            said = True
        time.sleep(0.05)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} (ckkb {what})\n".encode(), 0)
    except OSError:  # who holds it is only for the waiting message
        pass
    return WriterLock(fd, path)


def try_acquire(db_path: str | Path, what: str) -> WriterLock | None:
    """The writer lock when it is free now, else None (never waits)."""
    try:
        return acquire(db_path, what, timeout=0)
    except CkkbError:
        return None


def _journal(db_path: str | Path) -> Path:
    real = real_path(db_path)
    return real.with_name(real.name + "-journal")


def recover(db_path: str | Path, *, locked: bool = False) -> bool:
    """Roll back the hot journal a killed writer left (waiting for a live writer to finish: then
    its journal was not hot; `locked`: the caller holds the writer lock). True when a journal was
    rolled back. One stat when there is none."""
    journal = _journal(db_path)
    if not journal.exists() or not real_path(db_path).is_file():
        return False
    if locked:
        held = None
    else:
        try:
            held = acquire(db_path, "recovery", timeout=BUSY_TIMEOUT_MS / 1000, quiet=True)
        except CkkbError:  # a writer busy for that long: its journal is live, not hot
            return False
    try:
        if not journal.exists():
            return False
        conn = sqlite3.connect(real_path(db_path), timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute("select count(*) from sqlite_master").fetchone()  # rolls back
        except sqlite3.DatabaseError as e:
            raise CkkbError(
                f"cannot recover {db_path} from an interrupted write: {e}",
                hint="the folder must be writable; then run the command again",
            ) from None
        finally:
            conn.close()
        return True
    finally:
        if held is not None:
            held.release()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_temp(db_path: str | Path) -> list[Path]:
    """Remove `<db>.tmp-<pid>` files (and their journals) whose build process is gone."""
    real = real_path(db_path)
    removed: list[Path] = []
    try:
        names = os.listdir(real.parent)
    except OSError:
        return removed
    prefix = real.name + ".tmp-"
    for name in names:
        if not name.startswith(prefix):
            continue
        m = _TMP.search(name.removesuffix("-journal"))
        if m is None or _alive(int(m.group(1))):
            continue
        p = real.parent / name
        try:
            p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed
