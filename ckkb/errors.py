"""Errors a user can cause. The CLI prints them as
one line and exits non-zero, never a traceback."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path


class CkkbError(Exception):
    """A problem the user can fix (bad path, wrong schema, malformed input)."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class SourceNotFound(CkkbError):
    """A CK or aiter tree could not be found or is not what it claims to be."""


class DatabaseError(CkkbError):
    """The knowledge base is missing, unreadable or of another schema version."""


_DISK_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EROFS}
_DISK_MESSAGES = ("database or disk is full", "disk i/o error")


def write_error(e: BaseException, path: str | Path | None) -> CkkbError | None:
    """One line for a write that failed for want of room or a working disk (ENOSPC, a file-size
    limit, an I/O error, a read-only file system), else None. Writers only ever change the
    database in one transaction or by one rename, so nothing stored was lost."""
    where = f" {path}" if path else ""
    hint = "free some disk space (or check the disk) and run the command again"
    if isinstance(e, OSError) and e.errno in _DISK_ERRNOS:
        return CkkbError(
            f"cannot write{where}: {e.strerror or e}; nothing stored was lost", hint=hint
        )
    if isinstance(e, sqlite3.DatabaseError) and any(m in str(e).lower() for m in _DISK_MESSAGES):
        return CkkbError(f"cannot write{where}: {e}; nothing stored was lost", hint=hint)
    return None
