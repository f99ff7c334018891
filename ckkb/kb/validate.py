"""Inputs checked at the door of `ckkb ingest`: what is damaged is reported, never stored.

- Bundle records are checked against a JSON Schema (the `jsonschema` package): the header, the
  `race_log` records `ckkb race` writes, and one schema per ingested table, made from the table's
  declaration (column types, required columns) plus the ranges a measurement can take (M, N, K
  positive; times, rates and counts not negative). JSON's non-standard `NaN` and `Infinity` are read
  as text, so a number field holding them fails its type. Each bad record gives one line naming the
  field; the record is skipped, the rest of the bundle is stored.
- A log whose last line has no line end was cut (a copy or a writer stopped mid-line): that line
  is reported and not parsed, so a cut instance name is never stored as a result.
- The content hash a file is recorded under (`ingest_files.sha256`) is taken over its text with
  CRLF line ends made LF and trailing blank lines dropped: a CRLF copy of a log, or one with an
  extra newline, is the same log.
- `check_path` says what is wrong with a path in one line: missing, a folder, a symlink loop,
  unreadable.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import MISSING, fields
from functools import cache
from pathlib import Path
from typing import Any

from ckkb.errors import CkkbError
from ckkb.kb.schema import INGESTED, TABLES

POSITIVE = {"M", "N", "K"}  # a GEMM dimension
NOT_NEGATIVE = {  # times, rates, counts
    "us",
    "ms",
    "tflops",
    "gbps",
    "seconds",
    "samples",
    "spread",
    "value",
    "do_bench_us",
    "err",
    "best_ms",
    "best_tflops",
    "best_gbps",
    "instances_found",
    "warmup",
    "iterations",
    "cu_count",
}
RACE_STATUSES = ["ok", "crash", "timeout", "exit", "garbage", "no_output", "interrupted"]

_NULL_STR = {"type": ["string", "null"]}
_HOST = {
    "type": ["object", "null"],
    "properties": {
        "hostname": _NULL_STR,
        "gpu": _NULL_STR,
        "arch": _NULL_STR,
        "rocm": _NULL_STR,
        "cu_count": {"type": ["integer", "null"], "minimum": 1},
    },
}
_DIM = {"type": "integer", "minimum": 1}
SCHEMAS: dict[str, dict[str, Any]] = {
    "bundle": {
        "type": "object",
        "required": ["record"],
        "properties": {"kind": _NULL_STR, "created": _NULL_STR, "host": _HOST},
    },
    "race_log": {
        "type": "object",
        "properties": {
            "op": _NULL_STR,
            "argv": {"type": ["array", "null"], "items": {"type": ["string", "integer"]}},
            "command": _NULL_STR,
            "output": _NULL_STR,
            "exit_code": {"type": ["integer", "null"]},
            "status": {"enum": RACE_STATUSES + [None]},
            "failure": _NULL_STR,
            "started_at": _NULL_STR,
            "seconds": {"type": ["number", "null"], "minimum": 0},
            "timeout": {"type": ["number", "null"], "exclusiveMinimum": 0},
            "host": _HOST,
            "shape": {
                "type": ["object", "null"],
                "properties": {"M": _DIM, "N": _DIM, "K": _DIM, "line": {"type": "integer"}},
            },
        },
    },
}


def _table_schema(name: str) -> dict[str, Any]:
    """A record of an ingested table: its columns' types, its required columns, sane ranges."""
    t = TABLES[name]
    required = []
    if t.row_class is not None:
        required = [
            f.name
            for f in fields(t.row_class)
            if f.default is MISSING and f.default_factory is MISSING and f.name != "id"
        ]  # ids are given by the ingest
    props: dict[str, Any] = {}
    for c in t.columns:
        if c.json:
            continue
        sql_type = {"INTEGER": "integer", "REAL": "number", "TEXT": "string"}[c.type]
        prop: dict[str, Any] = {"type": [sql_type, "null"]}
        if c.name in POSITIVE:
            prop["minimum"] = 1
        elif c.name in NOT_NEGATIVE:
            prop["minimum"] = 0
        props[c.name] = prop
    return {"type": "object", "required": required, "properties": props}


# One compiled JSON Schema validator per record kind and process (module state on purpose):
# compiling costs more than validating a record, and the schemas are constants.
@cache
def _validator(record: str) -> Any:
    import jsonschema  # noqa: PLC0415  (only ingest needs it)

    schema = SCHEMAS.get(record)
    if schema is None:
        t = TABLES.get(record)
        if t is None or t.kind != INGESTED:
            return None
        schema = _table_schema(record)
    return jsonschema.Draft202012Validator(schema)


def record_errors(rec: dict[str, Any]) -> list[str]:
    """One message per bad field of a bundle record ('field M: ...'); [] when it is fine or of a
    record kind without a schema (reported elsewhere)."""
    v = _validator(str(rec.get("record")))
    if v is None:
        return []
    out = []
    missing = []
    for e in sorted(v.iter_errors(rec), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(p) for p in e.absolute_path)
        if e.validator == "required":
            name = e.message.split("'")[1] if e.message.count("'") >= 2 else e.message
            missing.append(".".join([where, name]).lstrip("."))
            continue
        out.append(f"field {where or '(record)'}: {e.message}")
    if missing:
        out.append(
            f"field{'s' if len(missing) > 1 else ''} {', '.join(missing)}: required, missing"
        )
    return out


def loads_record(line: str) -> Any:
    """A bundle line as JSON, with NaN and Infinity read as text (never a float)."""
    return json.loads(line, parse_constant=lambda name: name)


def normalised_sha256(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 of the file with CRLF made LF and trailing whitespace at the end dropped (see the
    module docstring); streamed, so memory stays flat whatever the size."""
    h = hashlib.sha256()
    held = b""  # trailing whitespace seen so far: written only when text follows it
    wrote = False
    with open(path, "rb") as f:
        for part in iter(lambda: f.read(chunk), b""):
            raw = held + part
            body = raw.rstrip(b" \t\r\n")  # ends in text: no CRLF straddles its end
            if body:
                h.update(body.replace(b"\r\n", b"\n"))
                wrote = True
            held = raw[len(body) :]
    if wrote:
        h.update(b"\n")
    return h.hexdigest()


def complete_lines(lines: Iterable[str], on_cut: Callable[[int, str], None]) -> Iterator[str]:
    """The lines, except a last line without a line end (it was cut): on_cut(line_no, text)."""
    prev: str | None = None
    n = 0
    for line in lines:
        if prev is not None:
            yield prev
        prev = line
        n += 1
    if prev is None:
        return
    if prev.endswith(("\n", "\r")) or not prev.strip():
        yield prev
    else:
        on_cut(n, prev)


def cut_message() -> str:
    return "last line is cut off (the file ends mid-line): not stored"


def check_path(path: str | Path, what: str = "file") -> Path:
    """The path when it is a readable file, else CkkbError naming what is wrong."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CkkbError(f"{p}: symlink loop (too many levels of symbolic links)") from None
        if e.errno == errno.ENOENT:
            if os.path.islink(p):
                raise CkkbError(f"{p}: broken symlink (its target does not exist)") from None
            raise CkkbError(f"no such {what}: {p}") from None
        raise CkkbError(f"cannot read {p}: {e.strerror or e}") from None
    if os.path.isdir(p):
        raise CkkbError(
            f"{p} is a directory, not a {what}",
            hint="pass the files themselves (a shell glob: dir/*.txt)",
        )
    if not os.access(p, os.R_OK):
        raise CkkbError(f"cannot read {p}: permission denied")
    del st
    return p
