"""JSON-lines bundles: a header line, then one record per row of an ingested table.

    {"record": "bundle", "kind": "harness", "created": "...", "host": {...}}
    {"record": "harness_ceilings", ...columns...}
    {"record": "harness_results", ...columns...}

`ckkb ingest` stores each record whose `record` names an ingested table, by column name. The file
is written to a temporary name beside the target and renamed, so a crash or a full disk never
leaves a half-written bundle behind.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ckkb.errors import CkkbError
from ckkb.kb.schema.base import row_dict
from ckkb.kb.schema.harness import HarnessCeilingRow, HarnessResultRow

BUNDLE_KIND = "harness"


def _clean(v: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def header(created: str, host: dict[str, Any]) -> dict[str, Any]:
    return {"record": "bundle", "kind": BUNDLE_KIND, "created": created, "host": _clean(host)}


def record(row: HarnessResultRow | HarnessCeilingRow) -> dict[str, Any]:
    return {"record": row.__table__, **_clean(row_dict(row))}


def write_bundle(
    path: str | Path,
    created: str,
    host: dict[str, Any],
    rows: Iterable[HarnessResultRow | HarnessCeilingRow],
) -> int:
    """Write the bundle atomically; returns the number of records (header excluded)."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise CkkbError(f"output folder does not exist: {parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(header(created, host), sort_keys=False) + "\n")
            for r in rows:
                f.write(json.dumps(record(r), allow_nan=False) + "\n")
                n += 1
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return n


def read_bundle(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the records of a harness bundle (for reports and tests; `ckkb ingest`
    is what stores a bundle in the knowledge base)."""
    p = Path(path)
    lines = p.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise CkkbError(f"{p}: empty bundle")
    try:
        head = json.loads(lines[0])
    except json.JSONDecodeError as e:
        raise CkkbError(f"{p}:1: not JSON ({e.msg})") from None
    if head.get("record") != "bundle" or head.get("kind") != BUNDLE_KIND:
        raise CkkbError(f"{p}:1: not a harness bundle header")
    recs = []
    for i, ln in enumerate(lines[1:], start=2):
        if not ln.strip():
            continue
        try:
            recs.append(json.loads(ln))
        except json.JSONDecodeError as e:
            raise CkkbError(f"{p}:{i}: not JSON ({e.msg})") from None
    return head, recs
