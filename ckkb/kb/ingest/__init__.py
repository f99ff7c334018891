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

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from ckkb import procs
from ckkb.errors import CkkbError
from ckkb.kb import atomic, lock, validate
from ckkb.kb import db as kbdb
from ckkb.kb.ingest.bundles import ingest_bundle
from ckkb.kb.ingest.writer import (
    BULK_BYTES,
    Context,
    Summary,
    Writer,
    ingest_lines,
    is_bundle,
    looks_binary,
    now_utc,
    read_lines,
)


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
    tree: str | None = None,
) -> Summary:
    """Ingest logs and bundles into the knowledge base at db_path (created empty if missing).
    Instance names are read against the name schemas of the CK tree `tree`, or by default, name
    by name, of the tree whose schemas read it exactly (ckkb.queries.name_trees)."""
    files = [Path(p) for p in paths]
    if not files:
        raise CkkbError("nothing to ingest", hint="pass one or more ckProfiler logs or bundles")
    for p in files:
        validate.check_path(p)
    writer = lock.acquire(db_path, "ingest")  # one writer at a time (ckkb.kb.lock)
    try:
        lock.clean_temp(db_path)  # left by a build killed before its rename
        return _ingest_locked(db_path, files, arch, gpu, cu, rocm, command, host, tree)
    except (OSError, sqlite3.DatabaseError) as e:
        err = atomic.write_error(e, db_path)
        if err is None:
            raise
        raise err from None
    finally:
        writer.release()


def _ingest_locked(
    db_path: str | Path,
    paths: list[Path],
    arch: str | None,
    gpu: str | None,
    cu: int | None,
    rocm: str | None,
    command: str | None,
    host: str | None,
    tree: str | None = None,
) -> Summary:
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
                "select name, sql from sqlite_master where type = 'index' "
                "and tbl_name = 'race_results' and sql is not null"
            ).fetchall()
            for name, _ in dropped:
                conn.execute(f"drop index [{name}]")
        w = Writer(conn, db, tree)
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
            if looks_binary(p):
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
            if is_bundle(p):
                kind = ingest_bundle(w, p, file=file, sha=sha, explicit=explicit, summary=summary)
            else:
                kind = "ckprofiler_log"

                def cut(n: int, text: str, file: str = file, sha: str = sha) -> None:
                    summary.errors.append(w.add_error(file, sha, n, validate.cut_message(), text))

                lines = validate.complete_lines(read_lines(p), cut)
                ingest_lines(w, lines, file=file, sha=sha, ctx=explicit, summary=summary)
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
                "insert into ingest_files (sha256, path, kind, ingested_at, rows_added) "
                "values (?, ?, ?, ?, ?)",
                [
                    sha,
                    file,
                    kind,
                    now_utc(),
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
