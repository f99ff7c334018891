"""Result keys: a bundle record may carry `key` (the fleet writes one on every record: run id,
host, GPU, shape, candidate, pass). A key already stored is not stored again, so re-ingesting a
merged or a grown bundle (an interrupted run's partial bundle, then the whole one) adds only what
is new. The key is kept in the row's JSON `extra` (races.extra for `race_log` records)."""

from __future__ import annotations

import sqlite3

from ckkb.queries import lookup

# record name -> the table whose `extra` holds its key
KEYED_TABLES = {"race_log": "races", "harness_results": "harness_results"}
KEYED_TABLES["harness_ceilings"] = "harness_ceilings"


class StoredKeys:
    """The keys of one ingest: those in the knowledge base (read once, with the first keyed
    record) and those this ingest has stored so far."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.keys: dict[str, set[str]] | None = None
        self.skipped = 0

    def _table(self, table: str) -> set[str]:
        if self.keys is None:
            self.keys = {t: set() for t in set(KEYED_TABLES.values())}
            for t, k in self.conn.execute(lookup("stored_keys")):
                self.keys[t].add(k)
        return self.keys[table]

    def claim(self, record: str, key: object) -> bool:
        """True when the record is new (and now claimed); False when its key is stored."""
        table = KEYED_TABLES.get(record)
        if table is None or not isinstance(key, str):
            return True
        have = self._table(table)
        if key in have:
            self.skipped += 1
            return False
        have.add(key)
        return True
