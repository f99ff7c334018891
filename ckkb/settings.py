"""Settings in one table: name, default, help. Read here, never as scattered literals."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    help: str


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "CKKB_DB",
            "db/ckkb.db",
            "knowledge-base path when --db is not given (relative to the current directory)",
        ),
        Setting("CKKB_JOBS", "0", "worker processes for `ckkb build` (0 = one per CPU core)"),
        Setting(
            "CKKB_CACHE_DIR",
            "",
            "cache for `ckkb audit`'s libcst extraction "
            "(default: $XDG_CACHE_HOME/ckkb, else ~/.cache/ckkb)",
        ),
        Setting(
            "CKKB_CK_REPO_URL",
            "",
            "URL prefix that turns CK file:line into links on the explain page",
        ),
    )
}


def get(name: str) -> str:
    return os.environ.get(name) or SETTINGS[name].default


def db_path(explicit: str | os.PathLike | None = None) -> Path:
    """--db PATH, else $CKKB_DB, else db/ckkb.db in the current directory."""
    return Path(explicit) if explicit else Path(get("CKKB_DB"))


def jobs() -> int:
    try:
        n = int(get("CKKB_JOBS"))
    except ValueError:
        n = 0
    return n if n > 0 else (os.cpu_count() or 1)
