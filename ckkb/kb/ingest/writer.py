"""Ingesting one ckProfiler log: its lines as races, results and errors, written in batches
(the names parsed once each, the commands read against the op's legend)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb.kb import db as kbdb
from ckkb.kb.ingest_keys import StoredKeys
from ckkb.kb.schema import TABLES
from ckkb.log_events import (
    ParseError,
    RaceEnd,
    RaceStart,
    Result,
    layout_from_best,
    normalise_dtype,
)
from ckkb.logs import iter_events
from ckkb.profiler_cmd import interpret_argv, split_command
from ckkb.profiler_legend import Legend
from ckkb.queries.name_trees import NameReader
from ckkb.queries.profiler import load_legend

BATCH = 20000
BULK_BYTES = (
    4 << 20
)  # files larger than this load race_results without its indexes, rebuilt at the end
RESULT_COLS = TABLES["race_results"].column_names()
RACE_COLS = TABLES["races"].column_names()
ERROR_COLS = TABLES["ingest_errors"].column_names()


@dataclass
class Context:
    """What the log does not say about where it ran (command-line options or bundle host facts)."""

    arch: str | None = None
    gpu: str | None = None
    cu: int | None = None
    rocm: str | None = None
    host: str | None = None
    command: str | None = None


@dataclass
class Summary:
    races_added: int = 0
    results_added: int = 0
    rows_added: dict[str, int] = field(default_factory=dict)  # other tables (bundle records)
    errors: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0  # records whose key was already stored (ckkb.kb.ingest_keys)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "races_added": self.races_added,
            "results_added": self.results_added,
            "errors": self.errors,
        }
        if self.duplicates:  # records whose key was stored before (fleet bundles)
            out["duplicates"] = self.duplicates
        return out


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class NameParser:
    """ckkb.names.parse with the name schemas of the knowledge base's CK trees (`tree`: that one
    tree's; None: per name the tree whose schemas read it exactly, ckkb.queries.name_trees),
    cached per distinct name. `parse` never raises: an unreadable name comes back with its
    error, op None."""

    def __init__(self, db: Any, tree: str | None = None) -> None:
        self.reader = NameReader.of(db, tree)
        # the CK tree the user named, whose reading this ingest's races join (races.name_tree);
        # None: each name read by the tree chosen for it (a tree of another kind names none)
        named = [t.name for t in self.reader.trees]
        self.tree = tree if tree is not None and named == [tree] else None
        self.cache: dict[str, tuple[str | None, str]] = {}
        # race_names rows not yet written: name, op, schema, fields, tree, chosen
        self.new: list[tuple[str, str | None, str | None, str, str, int]] = []

    def __call__(self, name: str) -> tuple[str | None, str]:
        hit = self.cache.get(name)
        if hit is not None:
            return hit
        out: tuple[str | None, str] = (None, "{}")
        schema = tree = None
        if name:
            p, tree = self.reader.read(name)
            j = p.to_json()
            fields = dict(j.get("fields") or {})
            fields.update(j.get("props") or {})
            if not j.get("fields") and j.get("args"):
                fields["args"] = j["args"]
            out = (j.get("op"), json.dumps(fields, default=str))
            schema = j.get("schema")
        self.new.append((name, out[0], schema, out[1], tree or "", int(self.tree is None)))
        if len(self.cache) < 100_000:
            self.cache[name] = out
        return out


class Writer:
    """Allocates ids and batches inserts on one connection (inside the caller's transaction)."""

    def __init__(self, conn: sqlite3.Connection, db: Any, tree: str | None = None) -> None:
        self.conn = conn
        self.db = db
        self.race_id = conn.execute("select coalesce(max(id), 0) from races").fetchone()[0]
        self.result_id = conn.execute("select coalesce(max(id), 0) from race_results").fetchone()[0]
        self.error_id = conn.execute("select coalesce(max(id), 0) from ingest_errors").fetchone()[0]
        self.legends: dict[str, Legend | None] = {}
        self.names = NameParser(db, tree)
        self.keys = StoredKeys(conn)
        marks = ", ".join("?" * len(RESULT_COLS))
        self._rsql = f"insert into race_results ({', '.join(RESULT_COLS)}) values ({marks})"

    def flush_names(self) -> None:
        """Write the names parsed since the last flush: one row per (name, tree that read it); a
        new reading of a stored (name, tree) replaces it (the tree's schemas may have been
        rebuilt). A reading chosen per name becomes the name's chosen one unless it has one."""
        if self.names.new:
            self.conn.executemany(
                "insert into race_names (name, op_template, schema, fields, tree, chosen) "
                "values (?1, ?2, ?3, ?4, ?5, ?6 and not exists "
                "(select 1 from race_names where name = ?1 and chosen)) "
                "on conflict (name, tree) do update set op_template = excluded.op_template, "
                "schema = excluded.schema, fields = excluded.fields, "
                "chosen = chosen or excluded.chosen",
                self.names.new,
            )
            self.names.new.clear()

    def legend(self, op: str | None) -> Legend | None:
        if not op:
            return None
        if op not in self.legends:
            try:
                self.legends[op] = load_legend(self.db, op, required=False)
            except Exception:
                self.legends[op] = None
        return self.legends[op]

    def next_race(self) -> int:
        self.race_id += 1
        return self.race_id

    def add_error(
        self,
        file: str,
        sha: str,
        line: int,
        message: str,
        text: str = "",
        race_id: int | None = None,
    ) -> dict[str, Any]:
        self.error_id += 1
        row = {
            "id": self.error_id,
            "file": file,
            "sha256": sha,
            "line": line,
            "message": message,
            "text": text[:500],
            "race_id": race_id,
        }
        self.conn.execute(
            f"insert into ingest_errors ({', '.join(ERROR_COLS)}) "
            f"values ({', '.join('?' * len(ERROR_COLS))})",
            [row[c] for c in ERROR_COLS],
        )
        return {"file": file, "line": line, "message": message}

    def add_race(self, row: dict[str, Any]) -> None:
        row = dict(row, name_tree=self.names.tree)  # whose reading of its names it joins
        self.conn.execute(
            f"insert into races ({', '.join('[' + c + ']' for c in RACE_COLS)}) "
            f"values ({', '.join('?' * len(RACE_COLS))})",
            [kbdb.sql_value(row.get(c)) for c in RACE_COLS],
        )


def shape_from_descriptors(descs: list[dict[str, Any]]) -> dict[str, int]:
    """a_m_k lengths {M, K}, b_k_n {K, N}, c_m_n / e_m_n {M, N} -> M, N, K (first seen wins)."""
    out: dict[str, int] = {}
    for d in descs:
        parts = d["name"].split("_")[1:]
        if len(parts) == len(d["lengths"]) and all(p in ("m", "n", "k", "g") for p in parts):
            for p, v in zip(parts, d["lengths"], strict=True):
                if p in "mnk":
                    out.setdefault(p.upper(), v)
    return out


def race_row(
    info: RaceEnd,
    ctx: Context,
    legend_for: Callable[[str | None], Legend | None],
    *,
    race_id: int,
    file: str,
    sha: str,
    line_offset: int = 0,
    started_at: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    command = ctx.command or info.command
    op, args = split_command(command) if command else (None, [])
    cmdvals = interpret_argv(legend_for(op), args) if op else {}
    hdr = info.header
    best = info.best or {}
    desc_shape = shape_from_descriptors(info.descriptors)

    def pick(*vals: Any) -> Any:
        for v in vals:
            if v is not None:
                return v
        return None

    row = {
        "id": race_id,
        "op": op,
        "dtype": pick(cmdvals.get("dtype"), normalise_dtype(hdr.get("datatype"))),
        "dtype_code": cmdvals.get("dtype_code"),
        "layout": pick(cmdvals.get("layout"), layout_from_best(hdr)),
        "layout_code": cmdvals.get("layout_code"),
        "M": pick(hdr.get("M"), cmdvals.get("M"), desc_shape.get("M")),
        "N": pick(hdr.get("N"), cmdvals.get("N"), desc_shape.get("N")),
        "K": pick(hdr.get("K"), cmdvals.get("K"), desc_shape.get("K")),
        "stride_a": pick(hdr.get("StrideA"), cmdvals.get("stride_a")),
        "stride_b": pick(hdr.get("StrideB"), cmdvals.get("stride_b")),
        "stride_c": pick(hdr.get("StrideC"), hdr.get("StrideE"), cmdvals.get("stride_c")),
        "kbatch": pick(hdr.get("KBatch"), best.get("kbatch"), cmdvals.get("kbatch")),
        "verification": None if cmdvals.get("verify") is None else bool(cmdvals["verify"]),
        "init": cmdvals.get("init"),
        "time_kernel": None if cmdvals.get("time") is None else bool(cmdvals["time"]),
        "warmup": pick(cmdvals.get("warmup"), info.warmup, cmdvals.get("warmup_default")),
        "iterations": pick(cmdvals.get("iters"), info.iterations, cmdvals.get("iters_default")),
        "arch": ctx.arch,
        "gpu": ctx.gpu,
        "cu_count": ctx.cu,
        "rocm": ctx.rocm,
        "host": ctx.host,
        "started_at": started_at or now_utc(),
        "command": command,
        "source_file": file,
        "source_line": info.line + line_offset,
        "sha256": sha,
        "instances_found": info.instances_found,
        "best_ms": best.get("ms"),
        "best_tflops": best.get("tflops"),
        "best_gbps": best.get("gbps"),
        "best_name": best.get("name"),
        "status": "ok",
        "failure": None,
        "exit_code": None,
        "descriptors": info.descriptors,
        "extra": dict(extra or {}),
    }
    if cmdvals.get("quirks"):
        row["extra"]["quirks"] = cmdvals["quirks"]
    if info.results == 0 and not info.best:
        row["status"] = "no_output"
        row["failure"] = "no instance result and no Best line in the output"
    return row


def log_items(lines: Iterable[str], first_line: int, w: Writer) -> Iterator[tuple]:
    """Lines -> ready-to-insert result tuples (batched, so memory stays flat whatever the log's
    length) and the other events, in order. Ids are counters on the writer.

    Parsing and inserting run in one thread: sqlite3 needs the GIL to bind every row's
    parameters, so a parser thread beside it only added lock hand-offs (measured: 1.6x slower)."""
    batch: list[tuple] = []
    race_id = None
    ordinal = 0
    names = w.names
    for ev in iter_events(lines, first_line):
        if type(ev) is Result:
            w.result_id += 1
            if ev.name not in names.cache:
                names(ev.name)  # parsed once per distinct name, into race_names
            batch.append(
                (
                    w.result_id,
                    race_id,
                    ordinal,
                    ev.line,
                    ev.ms,
                    ev.tflops,
                    ev.gbps,
                    int(ev.supported),
                    None if ev.verified is None else int(ev.verified),
                    ev.kbatch,
                    ev.name,
                    None if ev.raw == ev.name else ev.raw,
                )
            )
            ordinal += 1
            if len(batch) >= BATCH:
                yield ("rows", batch)
                batch = []
            continue
        if batch:
            yield ("rows", batch)
            batch = []
        if isinstance(ev, RaceStart):
            race_id = w.next_race()
            ordinal = 0
        yield ("event", ev, race_id)
    if batch:
        yield ("rows", batch)


def ingest_lines(
    w: Writer,
    lines: Iterable[str],
    *,
    file: str,
    sha: str,
    ctx: Context,
    summary: Summary,
    line_offset: int = 0,
    started_at: str | None = None,
    extra: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Stream one log's lines into the db, batch by batch (memory stays flat whatever the log's
    length). Returns the race rows written."""
    races: list[dict[str, Any]] = []
    for item in log_items(lines, 1 + line_offset, w):
        if item[0] == "rows":
            w.conn.executemany(w._rsql, item[1])
            w.flush_names()
            summary.results_added += len(item[1])
            continue
        ev, race_id = item[1], item[2]
        if isinstance(ev, ParseError):
            summary.errors.append(w.add_error(file, sha, ev.line, ev.message, ev.text, race_id))
        elif isinstance(ev, RaceEnd):
            row = race_row(
                ev,
                ctx,
                w.legend,
                race_id=race_id,
                file=file,
                sha=sha,
                started_at=started_at,
                extra=extra,
            )
            row["source_line"] = ev.line
            if status and status.get("status", "ok") != "ok":
                row["status"], row["failure"], row["exit_code"] = (
                    status["status"],
                    status.get("failure"),
                    status.get("exit_code"),
                )
            elif status:
                row["exit_code"] = status.get("exit_code")
            if ev.recognised == 0:
                row["status"] = "garbage" if row["status"] in ("ok", "no_output") else row["status"]
                row["failure"] = (
                    row["failure"] or f"no ckProfiler output recognised ({ev.skipped} lines)"
                )
            if row["verification"]:
                w.conn.execute(
                    "update race_results set verified = 1 where race_id = ? "
                    "and verified is null and supported = 1 and ms is not null",
                    [race_id],
                )
            w.add_race(row)
            races.append(row)
            summary.races_added += 1
    return races


def read_lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        yield from f


def looks_binary(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(8192)
    return b"\x00" in head


def is_bundle(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if not s.startswith("{"):
                return False
            try:
                obj = json.loads(s)
            except ValueError:
                return False
            return isinstance(obj, dict) and obj.get("record") == "bundle"
    return False
