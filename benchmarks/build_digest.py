"""Per-table content digests of a knowledge base, to check that a build optimisation changed no row.

    python3 benchmarks/build_digest.py DB [REFERENCE_DB]

Each extracted table's rows are read without `source_id`, `id`-like autoincrement columns kept
(they are part of the contract), sorted and hashed. With a second database, prints only the
tables whose digests differ (and exits 1 when any does). Ingested, FTS and build-info tables are
skipped: they do not come from extraction or they hold timestamps.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys

SKIP_SUFFIXES = ("_fts", "_fts_data", "_fts_idx", "_fts_docsize", "_fts_config")
SKIP = {"build_info", "sqlite_stat1", "sqlite_sequence"}


def digests(path: str) -> dict[str, tuple[int, str]]:
    """table -> (rows, sha256 of its sorted rows without source_id)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = {}
    names = [
        r[0]
        for r in conn.execute("select name from sqlite_master where type='table' order by name")
    ]
    for name in names:
        if name in SKIP or name.endswith(SKIP_SUFFIXES):
            continue
        cols = [r[1] for r in conn.execute(f"pragma table_info([{name}])") if r[1] != "source_id"]
        rows = sorted(
            repr(r)
            for r in conn.execute(f"select {', '.join('[' + c + ']' for c in cols)} from [{name}]")
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
    a = digests(argv[1])
    if len(argv) == 2:
        for name, (n, h) in a.items():
            print(f"{name:<40} {n:>8} {h}")
        return 0
    b = digests(argv[2])
    differ = 0
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            differ += 1
            print(f"DIFFERS {name}: {a.get(name)} vs reference {b.get(name)}")
    print(f"{len(set(a) | set(b)) - differ} tables identical, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
