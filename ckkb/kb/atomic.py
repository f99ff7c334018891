"""Putting a newly built knowledge base in place, durably, and naming write failures in one line.

A build writes `<db>.tmp-<pid>` beside the file the database path names (the link's target when
it is a symlink), then `replace()`:
  1. gives it the old file's permission bits (a 0600 database stays 0600),
  2. fsyncs it (the build writes it with synchronous=off: it is private until renamed),
  3. renames it over the target (atomic: readers see the old file or the new one, never half),
  4. fsyncs the folder, so the rename itself survives a power cut.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ckkb.errors import write_error
from ckkb.kb.lock import real_path

__all__ = ["replace", "tmp_path", "write_error"]


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
