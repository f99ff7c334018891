"""Errors a user can cause. The CLI prints them as
one line and exits non-zero, never a traceback."""

from __future__ import annotations


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
