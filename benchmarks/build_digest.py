"""Per-table content digests of a knowledge base, to check that a build optimisation changed no row.

    python3 benchmarks/build_digest.py DB[:TREE] [REFERENCE_DB[:TREE]]

Each extracted table's rows are read without `source_id` (and the `built` time of a tree), `id`-like
autoincrement columns kept (they are part of the contract), sorted and hashed. With a second
database, prints only the tables whose digests differ (and exits 1 when any does); columns only one
of the two has (a newer schema's) are left out of both. DB:TREE reads only the rows of the tree of
that name (with the first tree of the other kind), so one tree of a database that holds several
compares with a database built from that tree alone. Ingested, FTS and build-info tables are
skipped: they do not come from extraction or they hold timestamps.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys

SKIP_SUFFIXES = ("_fts", "_fts_data", "_fts_idx", "_fts_docsize", "_fts_config")
SKIP = {"build_info", "sqlite_stat1", "sqlite_sequence"}
SKIP_COLUMNS = {"source_id", "built"}


def _open(spec: str) -> tuple[sqlite3.Connection, list[int] | None]:
    """A database, and the source ids of the trees DB:TREE reads (None: all rows)."""
    path, _, tree = spec.partition(":")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    if not tree:
        return conn, None
    rows = conn.execute("select id, kind, name from sources order by id").fetchall()
    named = [r for r in rows if r[2] == tree]
    if not named:
        sys.exit(f"build_digest: no tree {tree!r} in {path} ({[r[2] for r in rows]})")
    ids = [named[0][0]] + [
        next(r[0] for r in rows if r[1] == k) for k in {r[1] for r in rows} - {named[0][1]}
    ]
    return conn, ids


def columns(spec: str) -> dict[str, list[str]]:
    conn, _ = _open(spec)
    out = {
        t: [r[1] for r in conn.execute(f"pragma table_info([{t}])")]
        for (t,) in conn.execute("select name from sqlite_master where type='table'")
    }
    conn.close()
    return out


def digests(spec: str, keep: dict[str, list[str]] | None = None) -> dict[str, tuple[int, str]]:
    """table -> (rows, sha256 of its sorted rows without source_id); `keep`: only these columns."""
    conn, ids = _open(spec)
    out = {}
    names = [
        r[0]
        for r in conn.execute("select name from sqlite_master where type='table' order by name")
    ]
    for name in names:
        if name in SKIP or name.endswith(SKIP_SUFFIXES):
            continue
        all_cols = [r[1] for r in conn.execute(f"pragma table_info([{name}])")]
        cols = [c for c in all_cols if c not in SKIP_COLUMNS]
        if keep is not None and name in keep:
            cols = [c for c in cols if c in keep[name]]
        where = ""
        if ids is not None and "source_id" in all_cols:
            where = f" where source_id in ({', '.join(map(str, ids))})"
        elif ids is not None and name == "sources":
            where = f" where id in ({', '.join(map(str, ids))}) or kind not in ('ck', 'aiter')"
        if name == "sources":  # source ids and the trees' names differ between databases
            cols = [c for c in cols if c not in ("id", "name", "fingerprint")]
        rows = sorted(
            repr(r)
            for r in conn.execute(
                f"select {', '.join('[' + c + ']' for c in cols)} from [{name}]{where}"
            )
        )
        h = hashlib.sha256()
        for r in rows:
            h.update(r.encode())
            h.update(b"\n")
        out[name] = (len(rows), h.hexdigest()[:16])
    conn.close()
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    if len(argv) == 2:
        for name, (n, h) in digests(argv[1]).items():
            print(f"{name:<40} {n:>8} {h}")
        return 0
    ca, cb = columns(argv[1]), columns(argv[2])
    common = {t: [c for c in ca[t] if c in cb[t]] for t in ca if t in cb}
    a = digests(argv[1], common)
    b = digests(argv[2], common)
    differ = 0
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            differ += 1
            print(f"DIFFERS {name}: {a.get(name)} vs reference {b.get(name)}")
    print(f"{len(set(a) | set(b)) - differ} tables identical, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
