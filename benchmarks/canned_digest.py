"""Every canned query's answer, digested: one line per (query, parameter set, tree), for checking
that a rewritten query answers the same (run it with the old and the new code, then diff).

    python3 benchmarks/canned_digest.py DB [--tree NAME ...] > new.txt
    PYTHONPATH=OLD_CHECKOUT python3 benchmarks/canned_digest.py DB [--tree NAME ...] > old.txt

Each line: query, parameters, tree ('-' = the defaults), row count and a hash of the rows as
Datasette serves them (the file's SQL through ckkb.kb.trees.scoped_sql, `served_sql`). The
parameter sets are real questions of the wheel's trees and of CK 2024-10 (some answer 0 rows on
one tree or the other); version_diff's name the knowledge base's first two CK trees.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # PYTHONPATH=OLD_CHECKOUT first

from ckkb.web.metadata import canned_queries, served_sql  # noqa: E402

SETS: dict[str, list[dict[str, str]]] = {
    "why_missing": [
        {"tile": "256x224x64", "arch": "gfx950"},
        {"tile": "128x128x64", "arch": "gfx90a"},
        {"tile": "", "arch": "gfx942"},
    ],
    "pool": [
        {"dir": "gemm_universal", "arch": "gfx950"},
        {"dir": "gemm_universal", "arch": "gfx942"},
        {"dir": "gemm", "arch": "gfx90a"},
        {"dir": "gemm_b_scale", "arch": "gfx942"},
    ],
    "pool_counts": [
        {"dir": "gemm_universal", "dtype": "bhalf_t"},
        {"dir": "gemm_universal", "dtype": ""},
        {"dir": "gemm", "dtype": "half_t"},
    ],
    "gate_census": [{"kind": "device_name", "arch": "gfx950"}, {"kind": "", "arch": ""}],
    "arch_diff": [
        {"arch_a": "gfx942", "arch_b": "gfx950"},
        {"arch_a": "gfx90a", "arch_b": "gfx942"},
        {"arch_a": "gfx1100", "arch_b": "gfx942"},
        {"arch_a": "gfx1030", "arch_b": "gfx1100"},
        {"arch_a": "gfx950", "arch_b": "gfx1201"},
    ],
    "audit_findings": [{"severity": ""}, {"severity": "error"}],
    "names_coverage": [{"status": ""}, {"status": "partial"}],
    "names_availability": [{"registration_id": "5"}, {"registration_id": "100"}],
    "version_diff": [
        {"dir": "gemm_universal", "dtype": "bhalf_t"},
        {"dir": "gemm_universal", "layout": "mk_nk"},
        {"arch": "gfx942"},
    ],
}


def digest(conn: sqlite3.Connection, trees: list[str]) -> list[str]:
    cks = [r[0] for r in conn.execute("select name from sources where kind = 'ck' order by id")]
    key = conn.execute("select key from instance_keys order by id limit 1").fetchone()
    out = []
    for name, q in canned_queries().items():
        sql = served_sql(q)
        sets = SETS.get(name, [{}])
        if name == "names_locate":
            sets = [{"key": key[0] if key else ""}]
        if name == "version_diff":
            pairs = [(cks[-1], cks[0]), (cks[0], cks[-1])]
            sets = [{**s, "from": a, "to": b} for s in sets for a, b in pairs]
        for given in sets:
            for tree in trees:
                params = {p: "" for p in q.params} | given | {"tree": tree}
                rows = conn.execute(sql, params).fetchall()
                h = hashlib.sha1(json.dumps(rows, default=str).encode()).hexdigest()[:16]
                shown = json.dumps(given, sort_keys=True)
                out.append(f"{name} {shown} tree={tree or '-'} rows={len(rows)} {h}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--tree", action="append", default=[], help="also ask of this tree")
    args = ap.parse_args()
    conn = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    print("\n".join(digest(conn, ["", *args.tree])))


if __name__ == "__main__":
    main()
