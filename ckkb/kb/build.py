"""`ckkb build`: run every extraction stage, write a new knowledge base, rename it into place.

- Atomic: rows go into `<db>.tmp-<pid>`, renamed over the old file only when everything worked, so
  an interrupted or failed build leaves the previous database untouched.
- Ingested data (races, results, harness measurements) is copied forward from the old file.
- Content-hash cache (`<db>.cache`): per (stage, file), keyed by size+mtime, then sha256, so a
  rebuild only re-parses what changed; when no input of any stage changed, the build is a no-op.
- Parallel: cache misses of all stages are extracted in one process pool (one worker per core, at a
  lower priority than this process), a file once for every stage that reads it with the same bytes
  (`extract_with`). Misses go to the workers as each stage group is inventoried (_submission_groups),
  so extraction overlaps the rest of the inventory; this process combines each stage, in build
  order, as soon as its files are in, and indexes its tables right away. Cyclic GC is off meanwhile
  (the rows hold no cycles).
"""

from __future__ import annotations

import gc
import hashlib
import json
import operator
import os
import pickle
import sqlite3
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ckkb
from ckkb import settings
from ckkb.diagnostics import Diagnostic
from ckkb.errors import DatabaseError
from ckkb.kb import db as kbdb
from ckkb.kb.schema import INGESTED, SCHEMA_VERSION, TABLES
from ckkb.kb.schema.core import DiagnosticRow, SourceRow
from ckkb.kb.stages import (
    BuildContext,
    FileResult,
    Stage,
    StageResult,
    get_stage,
    load_stages,
    register_stage,
)

if TYPE_CHECKING:
    import sqlite_utils

Progress = Callable[[str, int, int], None]  # (phase, done, total)

SERIAL_BELOW = 64  # fewer cache misses than this are extracted in-process
WORKER_NICENESS = 10


@dataclass
class BuildSummary:
    db_path: Path
    seconds: float = 0.0
    up_to_date: bool = False
    files: int = 0
    parsed: int = 0
    cached: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    carried: dict[str, int] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # stage -> {"extract_cpu": CPU seconds in workers, "combine": seconds, "combine_cpu": CPU seconds of the
    # combine (the parent process, so not inflated by busy workers), "insert": seconds, "extracted_at" and
    # "combined_at": seconds since the build started when a worker finished its last file / its rows were in}
    timings: dict[str, dict[str, float]] = field(default_factory=dict)


# ---------------------------------------------------------------- per-file extraction (workers)


Extracted = tuple[
    str, str, int, int, str, bytes, float, float
]  # stage, rel, size, mtime, sha256, pickled FileResult, CPU s, done at


def _extract_file(root: str, rel: str, stage_names: tuple[str, ...]) -> list[Extracted]:
    """Read and hash one file once and extract it for every stage that reads it, in a row (stages
    that parse the same bytes then share one parse: ckkb.extract.cpp.parse remembers the last).
    Never raises: failures become diagnostics."""
    t0 = time.process_time()
    path = Path(root) / rel
    try:
        st = path.stat()
        data = path.read_bytes()
    except OSError as e:
        out = []
        for stage_name in stage_names:
            res = FileResult(
                diagnostics=[
                    Diagnostic(rel, 0, f"cannot read: {e.strerror or e}", "error", stage_name)
                ]
            )
            out.append(
                (
                    stage_name,
                    rel,
                    -1,
                    -1,
                    "",
                    pickle.dumps(res),
                    time.process_time() - t0,
                    time.perf_counter(),
                )
            )
        return out
    sha = hashlib.sha256(data).hexdigest()
    out = []
    for stage_name in stage_names:
        try:
            res = get_stage(stage_name).extract(Path(root), rel, data)
        except Exception as e:  # an extractor bug must not lose the rest of the tree
            res = FileResult(
                diagnostics=[
                    Diagnostic(
                        rel, 0, f"extractor failed: {type(e).__name__}: {e}", "error", stage_name
                    )
                ]
            )
        blob = pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL)
        t1 = time.process_time()
        out.append(
            (stage_name, rel, st.st_size, st.st_mtime_ns, sha, blob, t1 - t0, time.perf_counter())
        )
        t0 = t1
    return out


def _worker_init() -> None:
    """Set a worker up for one build.

    - No cyclic garbage collection: extraction makes millions of small acyclic objects (facts,
      expression tuples) that reference counting frees; the collector's passes cost ~15% of it.
    - A lower priority than the parent: the parent's combines are the build's critical path (each
      waits for the one before it), a worker's next file can wait a moment. Without it the parent
      got a third of a core and finished its combines 1-1.5 s after the workers' last file.
    """
    gc.disable()
    try:
        os.nice(WORKER_NICENESS)
    except OSError:  # not permitted here: same priority, same result
        pass


FileTask = tuple[str, str, tuple[str, ...]]  # root, rel, the stages that read it (in build order)


_COLLECT_EVERY = 64 << 20  # input bytes a worker reads between two cyclic-GC passes
_read_since_collect = 0


def _extract_chunk(tasks: list[FileTask]) -> list[Extracted]:
    global _read_since_collect
    out = [r for t in tasks for r in _extract_file(*t)]
    # GC is off in workers (see _worker_init); should some input make cyclic garbage anyway, a
    # pass per 64 MiB read bounds it (the default tree is 25 MiB: no pass there)
    _read_since_collect += sum(max(r[2], 0) for r in out)
    if _read_since_collect >= _COLLECT_EVERY:
        _read_since_collect = 0
        gc.collect()
    return out


def _file_tasks(misses: list[tuple[str, str, str]]) -> list[FileTask]:
    """One task per (stage, file) in build order, except that a stage naming an earlier stage in
    `extract_with` (they parse the same bytes of a file) joins that stage's task for the file: one
    worker then reads, hashes and parses the file once for both."""
    tasks: list[tuple[str, str, list[str]]] = []
    where: dict[tuple[str, str, str], int] = {}  # (stage, root, rel) -> index in tasks
    for stage_name, root, rel in misses:
        host = getattr(get_stage(stage_name), "extract_with", None)
        i = where.get((host, root, rel)) if host else None
        if i is None:
            where[(stage_name, root, rel)] = len(tasks)
            tasks.append((root, rel, [stage_name]))
        else:
            tasks[i][2].append(stage_name)
    return [(root, rel, tuple(names)) for root, rel, names in tasks]


CHUNK_BYTES = (
    256 * 1024
)  # input bytes per worker task: few round trips, small enough to balance two workers
CHUNK_FILES = 32


def _size(root: str, rel: str) -> int:
    try:
        return os.stat(os.path.join(root, rel)).st_size
    except OSError:
        return 0


def _chunks(tasks: list[FileTask]) -> list[list[FileTask]]:
    """Worker tasks: each stage's files biggest first (so a stage's last chunks are small and both
    workers finish it together: the parent waits for its last file before combining it), cut into
    chunks of about CHUNK_BYTES; consecutive tasks of stages with the same `worker_group` go to one
    worker together, so that group's per-process setup (importing libcst for the aiter readers,
    ~0.25 s) is paid once, not once per worker."""
    blocks: list[list[tuple[int, FileTask]]] = []  # consecutive tasks led by one stage
    for t in tasks:
        if not blocks or blocks[-1][0][1][2][0] != t[2][0]:
            blocks.append([])
        blocks[-1].append((_size(t[0], t[1]), t))
    out: list[list[FileTask]] = []
    cur: list[FileTask] = []
    cur_bytes = 0
    cur_group = None
    for block in blocks:
        group = getattr(get_stage(block[0][1][2][0]), "worker_group", None)
        if group is None:
            block.sort(key=lambda st: -st[0])  # stable: equal sizes keep their order
        for size, t in block:
            full = group is None and (cur_bytes >= CHUNK_BYTES or len(cur) >= CHUNK_FILES)
            if cur and (group != cur_group or full):
                out.append(cur)
                cur, cur_bytes = [], 0
            cur.append(t)
            cur_bytes += size
            cur_group = group
    if cur:
        out.append(cur)
    return out


def _submission_groups(stages: list[Stage]) -> list[list[Stage]]:
    """Stages in the order their files are inventoried and handed to the workers: build order,
    except that a stage that extracts with another (`extract_with`) comes right after it (its tasks
    must be known before the other's go out, or the two would parse a file twice), and consecutive
    stages of one `worker_group` go out together (one worker reads them, see _chunks)."""
    rest = list(stages)
    groups: list[list[Stage]] = []
    while rest:
        group = [rest.pop(0)]
        for s in list(rest):
            if getattr(s, "extract_with", None) in {g.name for g in group}:
                rest.remove(s)
                group.append(s)
        wg = getattr(group[-1], "worker_group", None)
        while wg is not None and rest and getattr(rest[0], "worker_group", None) == wg:
            group.append(rest.pop(0))
        groups.append(group)
    return groups


# ---------------------------------------------------------------- cache


class Cache:
    """sqlite file beside the database: (stage, root, rel) -> size, mtime, sha256, pickled FileResult."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.conn = sqlite3.connect(path)
            self.conn.execute(
                "create table if not exists files (stage text, version text, root text, rel text, size int, "
                "mtime int, sha text, blob blob, primary key (stage, root, rel))"
            )
            self.conn.execute("create table if not exists meta (key text primary key, value text)")
        except sqlite3.DatabaseError:
            path.unlink(missing_ok=True)  # a corrupt cache is only a cache
            self.conn = sqlite3.connect(path)
            self.__init__(path)

    def load(self, stage: Stage, root: str) -> dict[str, tuple[int, int, str]]:
        """rel -> (size, mtime_ns, sha256) of every cached result of this stage version (no blobs)."""
        cur = self.conn.execute(
            "select rel, size, mtime, sha from files where stage=? and version=? and root=?",
            (stage.name, stage.version, root),
        )
        return {r[0]: (r[1], r[2], r[3]) for r in cur}

    def blobs(self, stage: Stage, root: str) -> dict[str, bytes]:
        cur = self.conn.execute(
            "select rel, blob from files where stage=? and version=? and root=?",
            (stage.name, stage.version, root),
        )
        return dict(cur)

    def store(self, rows: Iterable[tuple[str, str, str, str, int, int, str, bytes]]) -> None:
        with self.conn:
            self.conn.executemany("insert or replace into files values (?,?,?,?,?,?,?,?)", rows)

    def prune(self, stage: Stage, root: str, keep: set[str]) -> None:
        cur = self.conn.execute(
            "select rel from files where stage=? and root=?", (stage.name, root)
        )
        gone = [(stage.name, root, r[0]) for r in cur if r[0] not in keep]
        if gone:
            with self.conn:
                self.conn.executemany("delete from files where stage=? and root=? and rel=?", gone)

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------- writing rows


def _row_values(
    rows: list[Any], cols: list[str], json_cols: set[str], source_id: int | None
) -> list[list[Any]]:
    """Column values of each row in `cols` order; JSON columns serialised, source_id filled in."""
    fields = [c for c in cols if c != "source_id" or hasattr(rows[0], "source_id")]
    get = (
        operator.attrgetter(*fields)
        if len(fields) > 1
        else (lambda r, _f=fields[0]: (getattr(r, _f),))
    )
    json_pos = [i for i, c in enumerate(fields) if c in json_cols]
    add_source = len(fields) < len(cols)
    source_pos = fields.index("source_id") if not add_source and "source_id" in cols else -1
    to_json = kbdb.to_json
    out = []
    for r in rows:
        vals = list(get(r))
        for i in json_pos:
            v = vals[i]
            if v is not None and not isinstance(v, str):
                vals[i] = to_json(v)
        if add_source:
            vals.append(source_id)
        elif source_pos >= 0 and vals[source_pos] is None:
            vals[source_pos] = source_id
        out.append(vals)
    return out


def insert_rows(db: Any, rows: Iterable[Any], source_id: int | None = None) -> dict[str, int]:
    """Bulk-insert row dataclasses, grouped by table, in one transaction per table."""
    by_table: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        by_table[type(r).__table__].append(r)
    counts = {}
    for name, items in by_table.items():
        t = TABLES[name]
        cols = t.column_names()
        fields = [c for c in cols if c != "source_id" or hasattr(items[0], "source_id")] + (
            ["source_id"] if "source_id" in cols and not hasattr(items[0], "source_id") else []
        )
        sql = f"insert or replace into [{name}] ({', '.join('[' + c + ']' for c in fields)}) values ({', '.join('?' * len(fields))})"
        json_cols = {c.name for c in t.columns if c.json}
        try:
            values = _row_values(items, cols, json_cols, source_id)
            with db.conn:
                db.conn.executemany(sql, values)
        except (sqlite3.InterfaceError, sqlite3.ProgrammingError):
            # a value of an unexpected type (a dict in a TEXT column, say): convert every value
            slow = [
                [kbdb.sql_value(v) for v in vals]
                for vals in _row_values(items, cols, set(), source_id)
            ]
            with db.conn:
                db.conn.executemany(sql, slow)
        counts[name] = len(items)
    return counts


# ---------------------------------------------------------------- the build


def _tree_sources(trees: dict[str, Any]) -> dict[str, SourceRow]:
    out = {}
    for i, (kind, tree) in enumerate(sorted(trees.items()), start=1):
        version = getattr(tree, "version", None) if kind == "ck" else None
        wheel = (
            getattr(tree, "wheel_version", None) if kind == "ck" else getattr(tree, "version", None)
        )
        out[kind] = SourceRow(
            id=i, kind=kind, path=str(tree.root), version=version, wheel_version=wheel
        )
    return out


def _check_old(db_path: Path) -> bool:
    """True when an old knowledge base exists to carry ingested data from."""
    if not db_path.exists():
        return False
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        names = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        conn.close()
    except sqlite3.DatabaseError as e:
        raise DatabaseError(
            f"{db_path} exists and is not a SQLite database ({e}); refusing to overwrite it",
            hint="move it away or pass --db PATH",
        ) from None
    if "build_info" not in names:
        raise DatabaseError(
            f"{db_path} exists and is not a ckkb knowledge base; refusing to overwrite it",
            hint="move it away or pass --db PATH",
        )
    return True


def _carry_ingested(new: sqlite_utils.Database, old_path: Path) -> dict[str, int]:
    carried = {}
    new.execute("attach database ? as old", [str(old_path)])
    try:
        old_tables = {
            r[0] for r in new.execute("select name from old.sqlite_master where type='table'")
        }
        for t in TABLES.values():
            if t.kind != INGESTED or t.name not in old_tables:
                continue
            old_cols = {r[1] for r in new.execute(f"pragma old.table_info([{t.name}])")}
            cols = [c for c in t.column_names() if c in old_cols]
            if not cols:
                continue
            cl = ", ".join(f"[{c}]" for c in cols)
            with new.conn:
                cur = new.execute(
                    f"insert or ignore into main.[{t.name}] ({cl}) select {cl} from old.[{t.name}]"
                )
            if cur.rowcount > 0:
                carried[t.name] = cur.rowcount
    finally:
        new.conn.commit()
        new.execute("detach database old")
    return carried


def _stored_fingerprint(db_path: Path) -> str | None:
    """The input fingerprint recorded by the build that wrote db_path (sqlite3 only: cheap)."""
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            row = conn.execute("select value from build_info where key='fingerprint'").fetchone()
            version = conn.execute(
                "select value from build_info where key='schema_version'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
    if not row or not version or version[0] != str(SCHEMA_VERSION):
        return None
    return row[0]


def _fingerprint(parts: list[tuple[str, str, str, str]]) -> str:
    h = hashlib.sha256(f"{ckkb.__version__}|{SCHEMA_VERSION}".encode())
    for p in sorted(parts):
        h.update("|".join(p).encode())
        h.update(b"\n")
    return h.hexdigest()


def build(
    db_path: str | Path,
    trees: dict[str, Any],
    *,
    stages: list[Stage] | None = None,
    jobs: int | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> BuildSummary:
    """Build the knowledge base at db_path from `trees` ({"ck": CkTree, "aiter": AiterTree})."""
    t0 = time.perf_counter()
    db_path = Path(db_path)
    summary = BuildSummary(db_path=db_path)
    has_old = _check_old(db_path)
    stages = [s for s in (stages if stages is not None else load_stages()) if s.tree in trees]
    for s in stages:
        register_stage(s)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    cache = Cache(db_path.with_name(db_path.name + ".cache"))
    # The combines build ~200,000 rows of dicts and lists, none of them cyclic: the cyclic collector's
    # passes over them cost about a third of the combine CPU, so it is off for the build.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _build(db_path, trees, stages, jobs, force, progress, cache, summary, has_old, t0)
    finally:
        cache.close()
        if was_enabled:
            gc.enable()


def _build(
    db_path, trees, stages, jobs, force, progress, cache, summary, has_old, t0
) -> BuildSummary:
    # 1. Inventory: which files each stage reads, which are cached. Cache misses go to the workers
    #    as soon as their stage (group) is inventoried, so extraction overlaps the rest of the
    #    inventory and the database set-up below.
    plan: dict[str, dict[str, Any]] = {}
    misses: list[tuple[str, str, str]] = []
    hit_rels: dict[str, set[str]] = defaultdict(set)
    hits: dict[str, dict[str, bytes]] = defaultdict(dict)
    fp_parts: list[tuple[str, str, str, str]] = []
    diags: list[Diagnostic] = []
    n_jobs = jobs or settings.jobs()
    pool: ProcessPoolExecutor | None = None
    futures: deque[Any] = deque()  # worker chunks in submission order
    unsent: list[FileTask] = []  # tasks inventoried while too few to start workers for

    def inventory(stage: Stage) -> list[tuple[str, str, str]]:
        root = Path(trees[stage.tree].root)
        root_str = os.fspath(root)
        prefix = root_str.rstrip(os.sep) + os.sep
        rels = []
        found: list[tuple[str, str, str]] = []
        try:
            paths = stage.files(root)
        except OSError as e:
            diags.append(Diagnostic(str(root), 0, f"cannot list files: {e}", "error", stage.name))
            paths = []
        for p in paths:  # string ops, not pathlib: this loop runs for every input of a warm build
            sp = os.fspath(p)
            if sp.startswith(prefix):
                sp = sp[len(prefix) :]
            elif os.path.isabs(sp):
                sp = os.path.relpath(sp, root_str)
            rels.append(sp.replace(os.sep, "/"))
        cached = cache.load(stage, root_str)
        cache.prune(stage, root_str, set(rels))
        for rel in rels:
            entry = cached.get(rel)
            if entry is None:  # never extracted (a cold build): the worker reads and stats it
                found.append((stage.name, root_str, rel))
                continue
            try:
                st = os.stat(os.path.join(root_str, rel))
            except OSError:
                found.append((stage.name, root_str, rel))
                continue
            if entry[0] == st.st_size and entry[1] == st.st_mtime_ns:
                hit_rels[stage.name].add(rel)
                fp_parts.append((stage.name, stage.version, rel, entry[2]))
            else:
                found.append((stage.name, root_str, rel))
        plan[stage.name] = {"root": root, "rels": rels}
        return found

    try:
        for group in _submission_groups(stages):
            found = [m for stage in group for m in inventory(stage)]
            misses.extend(found)
            if n_jobs <= 1 or not found:
                continue
            unsent.extend(_file_tasks(found))
            if pool is None and len(misses) >= SERIAL_BELOW:
                pool = ProcessPoolExecutor(max_workers=n_jobs, initializer=_worker_init)
            if pool is not None:
                futures.extend(pool.submit(_extract_chunk, chunk) for chunk in _chunks(unsent))
                unsent = []
        summary.files = sum(len(p["rels"]) for p in plan.values())
        return _build_rest(
            db_path,
            trees,
            stages,
            force,
            progress,
            cache,
            summary,
            has_old,
            t0,
            plan,
            misses,
            hit_rels,
            hits,
            fp_parts,
            diags,
            pool,
            futures,
        )
    except BaseException:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        raise


def _build_rest(
    db_path,
    trees,
    stages,
    force,
    progress,
    cache,
    summary,
    has_old,
    t0,
    plan,
    misses,
    hit_rels,
    hits,
    fp_parts,
    diags,
    pool,
    futures,
) -> BuildSummary:
    phases = summary.timings.setdefault("(build)", {})
    phases["inventory"] = time.perf_counter() - t0
    summary.parsed = len(misses)
    summary.cached = summary.files - summary.parsed
    tree_parts = [("trees", k, str(v.root), "") for k, v in trees.items()]

    # 2. Nothing changed since the file at db_path was built: nothing to do.
    if (
        has_old
        and not force
        and not misses
        and _stored_fingerprint(db_path) == _fingerprint(fp_parts + tree_parts)
    ):
        summary.up_to_date = True
        summary.seconds = time.perf_counter() - t0
        return summary

    # 3. Extract the misses (in a process pool when there are many) and, as soon as every file of
    #    the next stage in order is in, combine that stage in this process while the workers go
    #    on with later stages' files. A changed mtime with the same content re-extracts but
    #    yields the same rows.
    sqlite_utils = kbdb.sqlite_utils_module()  # imported here: a no-op build never needs it

    versions = {s.name: s.version for s in stages}
    remaining: dict[str, int] = defaultdict(int)
    for stage_name, _root, _rel in misses:
        remaining[stage_name] += 1
    store: list[tuple[str, str, str, str, int, int, str, bytes]] = []
    all_diags = list(diags)
    tmp = db_path.with_name(f"{db_path.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        db = sqlite_utils.Database(tmp)
        db.execute("pragma journal_mode = off")
        db.execute("pragma synchronous = off")
        kbdb.create_tables(db)
        sources = _tree_sources(trees)
        insert_rows(db, sources.values())
        ctx = BuildContext(trees=trees)
        done = 0

        def timing(name: str) -> dict[str, float]:
            return summary.timings.setdefault(
                name, {"extract_cpu": 0.0, "combine": 0.0, "combine_cpu": 0.0, "insert": 0.0}
            )

        def absorb(result: Extracted) -> None:
            nonlocal done
            stage_name, rel, size, mtime, sha, blob, cpu, done_at = result
            timing(stage_name)["extract_cpu"] += cpu
            tm = timing(stage_name)
            tm["extracted_at"] = max(
                tm.get("extracted_at", 0.0), done_at - t0
            )  # perf_counter is system-wide
            hits[stage_name][rel] = blob
            fp_parts.append((stage_name, versions[stage_name], rel, sha))
            if size >= 0:
                store.append(
                    (
                        stage_name,
                        versions[stage_name],
                        str(plan[stage_name]["root"]),
                        rel,
                        size,
                        mtime,
                        sha,
                        blob,
                    )
                )
            remaining[stage_name] -= 1
            done += 1
            if progress and (
                done % 16 == 0 or done == len(misses)
            ):  # a redraw per file costs more than the file
                progress("parse", done, len(misses))

        def combine_stage(stage: Stage) -> None:
            root = plan[stage.name]["root"]
            if progress:
                progress(f"combine {stage.name}", 0, 1)
            if hit_rels[stage.name]:
                blobs = cache.blobs(stage, str(root))
                for rel in hit_rels[stage.name]:
                    hits[stage.name].setdefault(rel, blobs[rel])
            per_file = {
                rel: pickle.loads(hits[stage.name][rel])
                for rel in plan[stage.name]["rels"]
                if rel in hits[stage.name]
            }
            hits[stage.name].clear()
            for fr in per_file.values():
                all_diags.extend(fr.diagnostics)
            t_combine = time.perf_counter()
            cpu_combine = time.process_time()
            try:
                res = stage.combine(root, per_file, ctx)
            except Exception as e:
                res = StageResult(
                    diagnostics=[
                        Diagnostic(
                            str(root),
                            0,
                            f"{stage.name} failed: {type(e).__name__}: {e}",
                            "error",
                            stage.name,
                        )
                    ]
                )
            all_diags.extend(res.diagnostics)
            for r in res.rows:
                ctx.rows.setdefault(type(r).__table__, []).append(r)
            t_insert = time.perf_counter()
            timing(stage.name)["combine_cpu"] += time.process_time() - cpu_combine
            counts = insert_rows(db, res.rows, sources[stage.tree].id)
            # index what this stage wrote now, while the workers still extract (a later stage that
            # writes the same table inserts into an indexed table: slower, same rows), not at the end
            kbdb.create_indexes(db, counts)
            # full-text indexes too, for a table no earlier stage wrote; written again: redone at the end
            fts_now = {t for t in counts if TABLES[t].fts}
            fts_stale.update(fts_now & fts_fresh)
            kbdb.create_fts(db, fts_now - fts_fresh)
            fts_fresh.update(fts_now)
            timing(stage.name)["combine"] += t_insert - t_combine
            timing(stage.name)["insert"] += time.perf_counter() - t_insert
            for k, v in counts.items():
                summary.tables[k] = summary.tables.get(k, 0) + v
            timing(stage.name)["combined_at"] = time.perf_counter() - t0
            if progress:
                progress(f"combine {stage.name}", 1, 1)

        pending = list(stages)
        fts_fresh: set[str] = (
            set()
        )  # tables whose full-text index was built right after their stage
        fts_stale: set[str] = set()  # ... and then written again by a later stage

        def combine_ready() -> None:
            while pending and remaining[pending[0].name] == 0:
                combine_stage(pending.pop(0))

        t_phase = time.perf_counter()
        combine_ready()
        if pool is not None:
            while futures:
                for result in futures.popleft().result():
                    absorb(result)
                combine_ready()
            pool.shutdown(wait=True)
        else:
            for task in _file_tasks(misses):
                for result in _extract_file(*task):
                    absorb(result)
                combine_ready()
        combine_ready()
        phases["extract+combine"] = time.perf_counter() - t_phase
        t_phase = time.perf_counter()
        cache.store(store)
        phases["cache_store"] = time.perf_counter() - t_phase

        drows = [
            DiagnosticRow(
                stage=d.stage, file=d.file, line=d.line, severity=d.severity, message=d.message
            )
            for d in all_diags
        ]
        insert_rows(db, drows)
        summary.diagnostics = all_diags
        t_phase = time.perf_counter()
        if has_old:
            summary.carried = _carry_ingested(db, db_path)
        kbdb.finish_schema(db, fts_fresh=fts_fresh - fts_stale)
        kbdb.set_info(db, "fingerprint", _fingerprint(fp_parts + tree_parts))
        kbdb.set_info(db, "ckkb_version", ckkb.__version__)
        kbdb.set_info(db, "built_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        kbdb.set_info(db, "trees", json.dumps({k: str(v.root) for k, v in trees.items()}))
        db.execute("analyze")
        db.conn.commit()
        db.close()
        os.replace(tmp, db_path)
        phases["finish"] = time.perf_counter() - t_phase
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    summary.seconds = time.perf_counter() - t0
    return summary
