"""Ingesting a bundle (JSON lines from `ckkb race`, `ckkb harness` or a fleet): each record
checked against its schema, race logs replayed as logs, other records into their tables."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ckkb.kb import db as kbdb
from ckkb.kb import validate
from ckkb.kb.ingest.writer import Context, Summary, Writer, ingest_lines, race_row
from ckkb.kb.schema import INGESTED, TABLES, Table
from ckkb.log_events import (
    RaceEnd,
)


def host_context(base: Context, host: dict[str, Any] | None, explicit: Context) -> Context:
    host = host or {}

    def pick(e: Any, *keys: str) -> Any:
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


def ingest_bundle(
    w: Writer, path: Path, *, file: str, sha: str, explicit: Context, summary: Summary
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
                ingest_race_log(
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
            insert_generic(w, t, rec, lineno, file=file, sha=sha, summary=summary)
    return kind


def insert_generic(
    w: Writer,
    t: Table,
    rec: dict[str, Any],
    lineno: int,
    *,
    file: str,
    sha: str,
    summary: Summary,
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
            f"insert into [{t.name}] ({', '.join('[' + k + ']' for k in keys)}) "
            f"values ({', '.join('?' * len(keys))})",
            [kbdb.sql_value(data[k]) for k in keys],
        )
    except sqlite3.DatabaseError as e:
        summary.errors.append(w.add_error(file, sha, lineno, f"{t.name}: record not stored ({e})"))
        return
    summary.rows_added[t.name] = summary.rows_added.get(t.name, 0) + 1


def ingest_race_log(
    w: Writer,
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
    ctx = host_context(
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

    races = ingest_lines(
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
