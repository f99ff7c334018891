"""Ingested rows carried from an older knowledge base into a new one (`ckkb build` over a file of
another schema version: the migration path; ckkb.kb.build.writer.carry_ingested).

Rows are carried by column name; a column the old table lacks gets its default. Where an older
shape means something the default would not say, `carried` gives the SQL expression, over the
old table's row, that says it in the new shape:

- schema 4 -> 5: race_names was keyed by name alone, one reading per name, the one every race
  joined. It becomes the name's chosen reading (chosen = 1; races carried from 4 have no
  name_tree, so they join it, as before), and a reading made with no CK tree (tree NULL) is
  stored under tree '' (tree is part of the key).
- schema 5 -> 6: sources gains rows_of (a built table, written again by the build: nothing to
  carry).
"""

from __future__ import annotations

from collections.abc import Collection

from ckkb.kb.schema import Table

# table -> column -> (expression when the old table has the column, expression when it lacks it)
_CARRY: dict[str, dict[str, tuple[str, str]]] = {
    "race_names": {
        "tree": ("coalesce([tree], '')", "''"),
        "chosen": ("[chosen]", "1"),
    },
}


def carried(t: Table, old_cols: Collection[str]) -> list[tuple[str, str]]:
    """(column, SQL expression over the old row) of each column of `t` filled from an old table
    with columns `old_cols`; a column neither named there nor by _CARRY is left to its default."""
    rules = _CARRY.get(t.name, {})
    out = []
    for c in t.column_names():
        if c in rules:
            out.append((c, rules[c][0] if c in old_cols else rules[c][1]))
        elif c in old_cols:
            out.append((c, f"[{c}]"))
    return out
