"""Damage a build leaves: the diagnostics that change answers, counted and named.

Real trees always carry some diagnostics, so a build still succeeds; what it must not do is
swallow them. `ckkb build` prints `summary_line()`, `ckkb diagnostics` lists `damage()`, and
`ckkb build --strict` fails on any (for CI). The classification is lookups/damage.sql.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckkb.queries import lookup

if TYPE_CHECKING:
    import sqlite_utils

KINDS = {
    "unparsed": "file(s) did not parse",
    "list_not_found": "registration(s) name an instance list that was not found",
    "unresolved": "instance(s) whose device-op template was not resolved",
}


def damage(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """[{"kind", "stage", "file", "line", "severity", "message"}], by kind, file, line."""
    if "diagnostics" not in db.table_names():
        return []
    return [dict(r) for r in db.query(lookup("damage"))]


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """kind -> how many files (unparsed), registrations or instances it leaves unknown."""
    out = dict.fromkeys(KINDS, 0)
    files = {r["file"] for r in rows if r["kind"] == "unparsed"}
    out["unparsed"] = len(files)
    for r in rows:
        if r["kind"] != "unparsed":
            out[r["kind"]] += 1
    return out


def summary_line(rows: list[dict[str, Any]], first: int = 3) -> str:
    """One line: what the damage leaves unknown and the first files; '' when there is none."""
    if not rows:
        return ""
    n = counts(rows)
    parts = [f"{v} {KINDS[k]}" for k, v in n.items() if v]
    seen: list[str] = []
    for r in rows:
        where = f"{r['file']}:{r['line']}"
        if r["file"] not in {s.rsplit(":", 1)[0] for s in seen}:
            seen.append(where)
        if len(seen) == first:
            break
    return (
        f"damage: {'; '.join(parts)} (first: {', '.join(seen)}); "
        "answers about these are unknown: ckkb diagnostics lists them"
    )
