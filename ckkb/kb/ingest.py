"""`ckkb ingest`: ckProfiler logs and JSON-lines bundles into the knowledge base.

Plain logs
    Any text file of ckProfiler output (see ckkb.logs for every line shape). Each race in it becomes
    a `races` row, each instance line a `race_results` row; a damaged line becomes an
    `ingest_errors` row (file, line, message) and the rest of the log is stored. The context the
    log does not carry (arch, GPU, CU count, ROCm, command) comes from the command-line options.

Bundles (JSON lines)
    The first line is the header, every other line one record:

        {"record": "bundle", "kind": "race" | "harness", "created": "2026-01-01T00:00:00Z",
         "host": {"hostname": ..., "gpu": ..., "arch": ..., "cu_count": ..., "rocm": ...}}
        {"record": "race_log", "op": "gemm", "argv": ["ckProfiler", "gemm", "2", ...],
         "output": "<ckProfiler stdout+stderr as printed>", "exit_code": 0, "status": "ok",
         "failure": null, "started_at": "...", "seconds": 12.3, "host": {...}, "shape": {...}}
        {"record": "harness_results", ...columns of that table...}

    `race_log` records (written by `ckkb race`) are parsed as logs, with the argv as the command
    and the host facts as context; a record whose output holds no race (a crash before any
    output, a hang, garbage) still stores one race row with its status (crash | timeout | exit |
    garbage | no_output) and failure cause. Any record whose `record` names an `ingested` table in
    ckkb.kb.schema.TABLES is inserted by column name; keys the table lacks go into its JSON `extra`
    column when it has one, else are reported as errors. A line that is not JSON (e.g. the last line
    of a bundle whose writer was killed) is reported with its line number; the others are stored.

Re-ingesting the same bytes adds nothing: every file is recorded by sha256 in `ingest_files`.
Everything one `ingest()` call writes goes in one transaction; stored data is never touched.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb import names, procs
from ckkb.errors import CkkbError
from ckkb.kb import atomic, lock, validate
from ckkb.kb import db as kbdb
from ckkb.kb.ingest_keys import StoredKeys
from ckkb.kb.schema import INGESTED, TABLES
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


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _NameParser:
    """ckkb.names.parse with the knowledge base's name schemas, cached per distinct name.
    `parse` never raises: an unreadable name comes back with its error, op None."""

    def __init__(self, db: Any) -> None:
        has_schemas = "name_schemas" in db.table_names()
        self.schemas = names.load_schemas(db) if has_schemas else None
        self.cache: dict[str, tuple[str | None, str]] = {}
        # race_names rows not yet written
        self.new: list[tuple[str, str | None, str | None, str]] = []

    def __call__(self, name: str) -> tuple[str | None, str]:
        hit = self.cache.get(name)
        if hit is not None:
            return hit
        out: tuple[str | None, str] = (None, "{}")
        schema = None
        if name:
            j = names.parse(name, self.schemas).to_json()
            fields = dict(j.get("fields") or {})
            fields.update(j.get("props") or {})
            if not j.get("fields") and j.get("args"):
                fields["args"] = j["args"]
            out = (j.get("op"), json.dumps(fields, default=str))
            schema = j.get("schema")
        self.new.append((name, out[0], schema, out[1]))
        if len(self.cache) < 100_000:
            self.cache[name] = out
        return out


class _Writer:
    """Allocates ids and batches inserts on one connection (inside the caller's transaction)."""

    def __init__(self, conn: sqlite3.Connection, db) -> None:
        self.conn = conn
        self.db = db
        self.race_id = conn.execute("select coalesce(max(id), 0) from races").fetchone()[0]
        self.result_id = conn.execute("select coalesce(max(id), 0) from race_results").fetchone()[0]
        self.error_id = conn.execute("select coalesce(max(id), 0) from ingest_errors").fetchone()[0]
        self.legends: dict[str, Legend | None] = {}
        self.names = _NameParser(db)
        self.keys = StoredKeys(conn)
        self._rsql = f"insert into race_results ({', '.join(RESULT_COLS)}) values ({', '.join('?' * len(RESULT_COLS))})"

    def flush_names(self) -> None:
        """Write the names parsed since the last flush (each distinct name once, ever)."""
        if self.names.new:
            self.conn.executemany(
                "insert or ignore into race_names (name, op_template, schema, fields) values (?, ?, ?, ?)",
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
            f"insert into ingest_errors ({', '.join(ERROR_COLS)}) values ({', '.join('?' * len(ERROR_COLS))})",
            [row[c] for c in ERROR_COLS],
        )
        return {"file": file, "line": line, "message": message}

    def add_race(self, row: dict[str, Any]) -> None:
        self.conn.execute(
            f"insert into races ({', '.join('[' + c + ']' for c in RACE_COLS)}) values ({', '.join('?' * len(RACE_COLS))})",
            [kbdb.sql_value(row.get(c)) for c in RACE_COLS],
        )


def _shape_from_descriptors(descs: list[dict[str, Any]]) -> dict[str, int]:
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
    legend_for,
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
    desc_shape = _shape_from_descriptors(info.descriptors)

    def pick(*vals):
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
        "started_at": started_at or _now(),
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


def _items(lines: Iterable[str], first_line: int, w: _Writer) -> Iterator[tuple]:
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


def _ingest_lines(
    w: _Writer,
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
    for item in _items(lines, 1 + line_offset, w):
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
                    "update race_results set verified = 1 where race_id = ? and verified is null and supported = 1 and ms is not null",
                    [race_id],
                )
            w.add_race(row)
            races.append(row)
            summary.races_added += 1
    return races


def _read_lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        yield from f


def _looks_binary(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(8192)
    return b"\x00" in head


def _is_bundle(path: Path) -> bool:
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


def _host_ctx(base: Context, host: dict[str, Any] | None, explicit: Context) -> Context:
    host = host or {}

    def pick(e, *keys):
        if e is not None:
            return e
        for k in keys:
            if host.get(k) not in (None, ""):
                return host[k]
        return None

    cu = pick(explicit.cu, "cu_count", "cu", "compute_units")
    try:
        cu = int(cu) if cu is not None else None
    except (TypeError, ValueError):
        cu = None
    return Context(
        arch=pick(explicit.arch, "arch", "gfx_arch"),
        gpu=pick(explicit.gpu, "gpu", "gpu_name", "device"),
        cu=cu,
        rocm=pick(explicit.rocm, "rocm", "rocm_version"),
        host=pick(explicit.host, "hostname", "host"),
        command=base.command,
    )


def _ingest_bundle(
    w: _Writer, path: Path, *, file: str, sha: str, explicit: Context, summary: Summary
) -> str:
    header: dict[str, Any] = {}
    kind = "bundle"
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            s = line.strip()
            if not s:
                continue
            try:
                rec = validate.loads_record(s)
            except ValueError as e:
                why = getattr(e, "msg", str(e))
                summary.errors.append(
                    w.add_error(file, sha, lineno, f"not a JSON record ({why}); line skipped", s)
                )
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("record"), str):
                summary.errors.append(
                    w.add_error(file, sha, lineno, "record without a 'record' name; skipped", s)
                )
                continue
            name = rec["record"]
            bad = validate.record_errors(rec)
            if bad:
                summary.errors.append(
                    w.add_error(file, sha, lineno, f"{name} record: {'; '.join(bad)}; skipped", s)
                )
                continue
            if "key" in rec and not w.keys.claim(name, rec["key"]):
                summary.duplicates += 1
                continue
            if name == "bundle":
                header = rec
                kind = f"{rec.get('kind') or 'unknown'}_bundle"
                continue
            if name == "race_log":
                _ingest_race_log(
                    w,
                    rec,
                    lineno,
                    file=file,
                    sha=sha,
                    header=header,
                    explicit=explicit,
                    summary=summary,
                )
                continue
            t = TABLES.get(name)
            if t is None or t.kind != INGESTED or name in ("ingest_files",):
                summary.errors.append(
                    w.add_error(
                        file,
                        sha,
                        lineno,
                        f"unknown record {name!r}: not an ingested table; skipped",
                        s,
                    )
                )
                continue
            _insert_generic(w, t, rec, lineno, file=file, sha=sha, summary=summary)
    return kind


def _insert_generic(
    w: _Writer, t, rec: dict[str, Any], lineno: int, *, file: str, sha: str, summary: Summary
) -> None:
    cols = t.column_names()
    data = {k: v for k, v in rec.items() if k != "record"}
    unknown = {k: data.pop(k) for k in list(data) if k not in cols}
    if unknown:
        if "extra" in cols:
            extra = data.get("extra") or {}
            if isinstance(extra, str):
                try:
                    extra = json.loads(extra)
                except ValueError:
                    extra = {"extra": extra}
            extra.update(unknown)
            data["extra"] = extra
        else:
            summary.errors.append(
                w.add_error(
                    file,
                    sha,
                    lineno,
                    f"{t.name}: keys not in the table, not stored: {', '.join(sorted(unknown))}",
                )
            )
    if t.pk == "id" and data.get("id") is None:
        data["id"] = (
            w.conn.execute(f"select coalesce(max(id), 0) from [{t.name}]").fetchone()[0] or 0
        ) + 1
    if "race_id" in cols and t.name != "ingest_errors":
        race = data.get("race_id")
        if not w.conn.execute("select 1 from races where id = ?", [race]).fetchone():
            summary.errors.append(
                w.add_error(
                    file, sha, lineno, f"{t.name}: field race_id: no race {race!r}; skipped"
                )
            )
            return
    keys = [c for c in cols if c in data]
    try:
        w.conn.execute(
            f"insert into [{t.name}] ({', '.join('[' + k + ']' for k in keys)}) values ({', '.join('?' * len(keys))})",
            [kbdb.sql_value(data[k]) for k in keys],
        )
    except sqlite3.DatabaseError as e:
        summary.errors.append(w.add_error(file, sha, lineno, f"{t.name}: record not stored ({e})"))
        return
    summary.rows_added[t.name] = summary.rows_added.get(t.name, 0) + 1


def _ingest_race_log(
    w: _Writer,
    rec: dict[str, Any],
    lineno: int,
    *,
    file: str,
    sha: str,
    header: dict[str, Any],
    explicit: Context,
    summary: Summary,
) -> None:
    argv = rec.get("argv") or []
    command = explicit.command or (" ".join(str(a) for a in argv) if argv else rec.get("command"))
    host = dict(header.get("host") or {})
    host.update(rec.get("host") or {})
    ctx = _host_ctx(
        Context(command=command),
        host,
        Context(arch=explicit.arch, gpu=explicit.gpu, cu=explicit.cu, rocm=explicit.rocm),
    )
    status = {
        "status": rec.get("status") or "ok",
        "failure": rec.get("failure"),
        "exit_code": rec.get("exit_code"),
    }
    keep = ("seconds", "shape", "timeout", "key", "attempts")
    extra: dict[str, Any] = {k: rec[k] for k in keep if k in rec}
    if "key" in rec:  # a fleet record: where it ran, for fleet_spread
        extra["provenance"] = rec.get("host")
    output = rec.get("output") or ""
    if not isinstance(output, str):
        summary.errors.append(w.add_error(file, sha, lineno, "race_log output is not text"))
        output = ""
    n_before = summary.races_added

    def cut(n: int, text: str) -> None:
        summary.errors.append(
            w.add_error(file, sha, lineno, f"output line {n}: {validate.cut_message()}", text)
        )

    races = _ingest_lines(
        w,
        validate.complete_lines(output.splitlines(keepends=True), cut),
        file=file,
        sha=sha,
        ctx=ctx,
        summary=summary,
        started_at=rec.get("started_at"),
        extra=extra,
        status=status,
    )
    for r in races:
        w.conn.execute("update races set source_line = ? where id = ?", [lineno, r["id"]])
    if summary.races_added == n_before:
        # nothing ckProfiler-like in the output: still one race row, with the failure's cause
        info = RaceEnd(line=lineno, end_line=lineno, command=command)
        row = race_row(
            info,
            ctx,
            w.legend,
            race_id=w.next_race(),
            file=file,
            sha=sha,
            started_at=rec.get("started_at"),
            extra=extra,
        )
        row["source_line"] = lineno
        if status["status"] != "ok":
            row["status"], row["failure"], row["exit_code"] = (
                status["status"],
                status["failure"],
                status["exit_code"],
            )
        elif output.strip():
            row["status"], row["failure"] = "garbage", "output holds no ckProfiler line"
        row["exit_code"] = status["exit_code"]
        shape = rec.get("shape") or {}
        for k in ("M", "N", "K"):
            if row.get(k) is None and shape.get(k) is not None:
                row[k] = shape[k]
        w.add_race(row)
        summary.races_added += 1


def ingest(
    db_path: str | Path,
    paths: Iterable[str | Path],
    *,
    arch: str | None = None,
    gpu: str | None = None,
    cu: int | None = None,
    rocm: str | None = None,
    command: str | None = None,
    host: str | None = None,
) -> Summary:
    """Ingest logs and bundles into the knowledge base at db_path (created empty if missing)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise CkkbError("nothing to ingest", hint="pass one or more ckProfiler logs or bundles")
    for p in paths:
        validate.check_path(p)
    writer = lock.acquire(db_path, "ingest")  # one writer at a time (ckkb.kb.lock)
    try:
        lock.clean_temp(db_path)  # left by a build killed before its rename
        return _ingest_locked(db_path, paths, arch, gpu, cu, rocm, command, host)
    except (OSError, sqlite3.DatabaseError) as e:
        err = atomic.write_error(e, db_path)
        if err is None:
            raise
        raise err from None
    finally:
        writer.release()


def _ingest_locked(db_path, paths, arch, gpu, cu, rocm, command, host) -> Summary:
    db = kbdb.open_db(db_path, create=True)
    if any(
        t not in db.table_names()
        for t in ("races", "race_results", "race_names", "ingest_errors", "ingest_files")
    ):
        kbdb.create_tables(db)  # a knowledge base built before these tables existed
    conn = db.conn
    summary = Summary()
    explicit = Context(arch=arch, gpu=gpu, cu=cu, rocm=rocm, host=host, command=command)
    dropped: list[tuple[str, str]] = []
    # readers (ckkb serve) never see a half-written ingest; they wait for the commit instead
    conn.execute(f"pragma busy_timeout = {lock.BUSY_TIMEOUT_MS}")
    conn.execute("pragma cache_size = -1000000")  # no spill: readers are locked out only at commit
    try:
        conn.execute("begin immediate")
        procs.fault_point("ingest-begin")
        if sum(p.stat().st_size for p in paths) > BULK_BYTES:
            # bulk load: index maintenance per row costs more than one sort at the end
            dropped = conn.execute(
                "select name, sql from sqlite_master where type = 'index' and tbl_name = 'race_results' and sql is not null"
            ).fetchall()
            for name, _ in dropped:
                conn.execute(f"drop index [{name}]")
        w = _Writer(conn, db)
        seen: set[str] = set()
        for p in paths:
            file = str(p)
            try:
                sha = validate.normalised_sha256(p)  # a CRLF copy is the same log
            except OSError as e:
                raise CkkbError(f"cannot read {p}: {e.strerror or e}") from None
            dup = (
                sha in seen
                or conn.execute("select 1 from ingest_files where sha256 = ?", [sha]).fetchone()
            )
            if dup:
                summary.files.append(
                    {
                        "path": file,
                        "sha256": sha,
                        "kind": None,
                        "duplicate": True,
                        "races": 0,
                        "results": 0,
                        "stored": False,
                    }
                )
                continue
            seen.add(sha)
            before = (
                summary.races_added,
                summary.results_added,
                sum(summary.rows_added.values()),
                len(summary.errors),
                summary.duplicates,
            )
            if _looks_binary(p):
                summary.errors.append(
                    {
                        "file": file,
                        "line": 0,
                        "message": "binary file, not a ckProfiler log or bundle; nothing stored",
                    }
                )
                summary.files.append(
                    {
                        "path": file,
                        "sha256": sha,
                        "kind": "binary",
                        "duplicate": False,
                        "races": 0,
                        "results": 0,
                        "stored": False,
                    }
                )
                continue
            if _is_bundle(p):
                kind = _ingest_bundle(w, p, file=file, sha=sha, explicit=explicit, summary=summary)
            else:
                kind = "ckprofiler_log"

                def cut(n: int, text: str, file: str = file, sha: str = sha) -> None:
                    summary.errors.append(w.add_error(file, sha, n, validate.cut_message(), text))

                lines = validate.complete_lines(_read_lines(p), cut)
                _ingest_lines(w, lines, file=file, sha=sha, ctx=explicit, summary=summary)
                procs.fault_point("ingest-rows")
            races = summary.races_added - before[0]
            results = summary.results_added - before[1]
            other = sum(summary.rows_added.values()) - before[2]
            dups = summary.duplicates - before[4]  # every record already stored: not an error
            if races == 0 and other == 0 and dups == 0:
                summary.errors.append(
                    {
                        "file": file,
                        "line": 0,
                        "message": "no ckProfiler output or bundle record found; nothing stored",
                    }
                )
                summary.files.append(
                    {
                        "path": file,
                        "sha256": sha,
                        "kind": kind,
                        "duplicate": False,
                        "races": 0,
                        "results": 0,
                        "stored": False,
                    }
                )
                continue
            conn.execute(
                "insert into ingest_files (sha256, path, kind, ingested_at, rows_added) values (?, ?, ?, ?, ?)",
                [
                    sha,
                    file,
                    kind,
                    _now(),
                    races + results + other + (len(summary.errors) - before[3]),
                ],
            )
            summary.files.append(
                {
                    "path": file,
                    "sha256": sha,
                    "kind": kind,
                    "duplicate": False,
                    "races": races,
                    "results": results,
                    "stored": True,
                }
            )
        for _, ddl in dropped:
            conn.execute(ddl)
        procs.fault_point("ingest-commit")
        conn.execute("commit")
        procs.fault_point("ingest-committed")
    except BaseException:
        if conn.in_transaction:
            try:
                conn.execute("rollback")
            except sqlite3.DatabaseError:  # the journal rolls it back on the next open
                pass
        raise
    finally:
        db.close()
    return summary
