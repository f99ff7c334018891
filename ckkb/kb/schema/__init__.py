"""The knowledge-base schema: every table is a row dataclass registered in one of these modules.

`SCHEMA_VERSION` changes whenever a table or column changes; `ckkb serve` and the queries
refuse a database of another version and say how to rebuild.
"""

from __future__ import annotations

from ckkb.kb.schema import (  # noqa: F401  (importing registers the tables)
    aiter,
    ck_archs,
    ck_instances,
    ck_registrations,
    core,
    harness,
    names,
    profiler,
)
from ckkb.kb.schema.base import BUILT, INGESTED, TABLES, Column, Table, col, row_dict, table

SCHEMA_VERSION = 6  # 4: dtype_spellings; 5: race_names by (name, tree); 6: sources.rows_of

__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "Table",
    "Column",
    "table",
    "col",
    "row_dict",
    "BUILT",
    "INGESTED",
]
