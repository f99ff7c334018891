"""A second way to compute the version_diff canned query's answer, for tests: apart from its SQL
(tests/unit/test_versions_diff.py, tests/integration/test_versions_diff.py)."""

from __future__ import annotations

import sqlite3

from ckkb.queries import sql
from ckkb.versions.pairing import pair


def expected_by_python(path, old: str, new: str, dir: str, ctype: str) -> set:
    """The canned query's rows, computed apart from it: each tree's entries read through its
    scoped connection, paired by ckkb.versions.pairing (Python, not the query's GROUP BY), and
    compared on the ck_instance_availability view (not the query's own availability)."""
    from ckkb.kb.db import open_db
    from ckkb.queries.ck import known_archs

    sides = []
    for name in (old, new):
        db = open_db(path, readonly=True, tree=name)
        try:
            rows = [
                dict(r)
                for r in db.query(
                    "select id, template, resolved, dir, file, line from instances "
                    "where (:d = '' or dir = :d) and (:t = '' or (a_dtype = :t and b_dtype = :t "
                    "and c_dtype = :t))",
                    {"d": dir, "t": ctype},
                )
            ]
            avail = {
                (r["instance_id"], r["arch"]): r["a"]
                for r in db.query(
                    "select instance_id, arch, max(available) as a "
                    "from ck_instance_availability group by 1, 2"
                )
            }
            sides.append((rows, avail, set(known_archs(db)[1])))
        finally:
            db.close()
    (a, av_a, built_a), (b, av_b, built_b) = sides
    added, removed, same = pair(a, b, lambda r: (r["template"], r["resolved"]))
    out = {("added", None, None, f"{r['file']}:{r['line']}") for r in added}
    out |= {("removed", None, f"{r['file']}:{r['line']}", None) for r in removed}
    for x, y in same:
        for arch in built_a & built_b:
            if av_a.get((x["id"], arch), 0) != av_b.get((y["id"], arch), 0):
                out.add(("changed", arch, f"{x['file']}:{x['line']}", f"{y['file']}:{y['line']}"))
    return out


def canned_rows(path, old: str, new: str, dir: str, ctype: str) -> set:
    conn = sqlite3.connect(path)
    params = {"from": old, "to": new, "arch": "", "dir": dir, "dtype": ctype, "layout": ""}
    cur = conn.execute(sql("version_diff"), params)
    cols = [d[0] for d in cur.description]
    out = set()
    for r in (dict(zip(cols, row, strict=True)) for row in cur):
        at_from = f"{r['from_file']}:{r['from_line']}" if r["from_file"] else None
        at_to = f"{r['to_file']}:{r['to_line']}" if r["to_file"] else None
        out.add((r["change"], r["arch"], at_from, at_to))
    return out
