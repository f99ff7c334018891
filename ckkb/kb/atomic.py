"""Putting a newly built knowledge base in place, durably, and naming write failures in one line.

A build writes `<db>.tmp-<pid>` beside the file the database path names (the link's target when
it is a symlink), then `replace()`:
  1. gives it the old file's permission bits (a 0600 database stays 0600),
  2. fsyncs it (the build writes it with synchronous=off: it is private until renamed),
  3. renames it over the target (atomic: readers see the old file or the new one, never half),
  4. fsyncs the folder, so the rename itself survives a power cut.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path

from ckkb.errors import CkkbError
from ckkb.kb.lock import real_path

_DISK_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EROFS}
_DISK_MESSAGES = ("database or disk is full", "disk i/o error")


def tmp_path(db_path: str | Path) -> Path:
    real = real_path(db_path)
    return real.with_name(f"{real.name}.tmp-{os.getpid()}")


def _fsync(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace(tmp: Path, db_path: str | Path) -> None:
    """Rename the finished `tmp` over the database (see the module docstring)."""
    target = real_path(db_path)
    try:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = None
        if mode is not None:
            os.chmod(tmp, mode)
        _fsync(tmp)
        os.replace(tmp, target)
        try:
            _fsync(target.parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:  # some file systems cannot fsync a folder; the rename is done anyway
            pass
    except OSError as e:
        raise write_error(e, target) or e from None


def write_error(e: BaseException, path: str | Path | None) -> CkkbError | None:
    """One line for a write that failed for want of room or a working disk (ENOSPC, a file-size
    limit, an I/O error, a read-only file system), else None."""
    where = f" {path}" if path else ""
    if isinstance(e, OSError) and e.errno in _DISK_ERRNOS:
        return CkkbError(
            f"cannot write{where}: {e.strerror or e}; nothing stored was lost",
            hint="free some disk space (or check the disk) and run the command again",
        )
    if isinstance(e, sqlite3.DatabaseError):
        text = str(e).lower()
        if any(m in text for m in _DISK_MESSAGES):
            return CkkbError(
                f"cannot write{where}: {e}; nothing stored was lost",
                hint="free some disk space (or check the disk) and run the command again",
            )
    return None
