"""One `ckkb build`: inventory, extraction in workers, each stage's combine, the new database.

- Atomic: rows go into `<db>.tmp-<pid>`, renamed over the old file only when everything worked, so
  an interrupted or failed build leaves the previous database untouched.
- Ingested data (races, results, harness measurements) is copied forward from the old file.
- Cached: per (stage, file), keyed by size+mtime, then sha256 (`cache.Cache`), so a rebuild only
  re-extracts what changed; when no input of any stage changed, the build is a no-op.
- Parallel: cache misses go to a process pool as each stage group is inventoried, so extraction
  overlaps the rest of the inventory; this process combines each stage, in the order
  `build_order` derives from what stages read and write, as soon as its files are in, and
  indexes its tables right away.
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ckkb
from ckkb import procs, settings
from ckkb.diagnostics import Diagnostic
from ckkb.kb import atomic, lock
from ckkb.kb import db as kbdb
from ckkb.kb.build import gc_policy, workers
from ckkb.kb.build.cache import Cache, CacheRow
from ckkb.kb.build.plan import StagePlan, inventory
from ckkb.kb.build.writer import (
    FingerprintPart,
    carry_ingested,
    check_old,
    fingerprint,
    insert_rows,
    stored_fingerprint,
    tree_sources,
)
from ckkb.kb.schema import TABLES
from ckkb.kb.schema.core import DiagnosticRow
from ckkb.kb.stages import (
    BuildContext,
    Stage,
    StageError,
    StageResult,
    build_order,
    check_writes,
    register_stages,
)

Progress = Callable[[str, int, int], None]  # (phase, done, total)

SERIAL_BELOW = 64  # fewer cache misses than this are extracted in-process


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
    # stage -> {"extract_cpu": CPU seconds in workers, "combine": seconds, "combine_cpu": CPU
    # seconds of the combine (this process, so not inflated by busy workers), "insert": seconds,
    # "extracted_at" and "combined_at": seconds since the build started when a worker finished
    # its last file / its rows were in}
    timings: dict[str, dict[str, float]] = field(default_factory=dict)


def build(
    db_path: str | Path,
    trees: dict[str, Any],
    *,
    stages: list[Stage],
    jobs: int | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> BuildSummary:
    """Build the knowledge base at db_path from `trees` ({"ck": CkTree, "aiter": AiterTree}) with
    `stages` (all of them: `ckkb.pipeline.stages()`); stages of trees not given are left out."""
    path = Path(db_path)
    ordered = build_order([s for s in stages if s.tree in trees])
    register_stages(ordered)
    run = _Build(path, trees, ordered, jobs or settings.jobs(), force, progress)
    try:
        with gc_policy.relaxed():
            return run.run()
    finally:
        run.cache.close()


class _Build:
    """The state of one build, phase by phase: plan, extract and combine, finish."""

    def __init__(
        self,
        db_path: Path,
        trees: dict[str, Any],
        stages: list[Stage],
        jobs: int,
        force: bool,
        progress: Progress | None,
    ) -> None:
        self.t0 = time.perf_counter()
        self.db_path = db_path
        self.trees = trees
        self.stages = stages
        self.jobs = jobs
        self.force = force
        self.progress = progress
        self.summary = BuildSummary(db_path=db_path)
        lock.clean_temp(db_path)  # left by builds killed before their rename
        lock.recover(db_path)  # a hot journal left by a killed ingest
        self.has_old = check_old(db_path)
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self.cache = Cache(db_path.with_name(db_path.name + ".cache"))
        self.plans: dict[str, StagePlan] = {}
        self.misses: list[workers.Miss] = []
        self.fp_parts: list[FingerprintPart] = [
            ("trees", k, str(v.root), "") for k, v in trees.items()
        ] + [("stage", s.name, s.version, "") for s in stages]
        self.diags: list[Diagnostic] = []
        self.pool: ProcessPoolExecutor | None = None
        self.futures: set[Future[list[workers.Extracted]]] = set()
        self.blobs: dict[str, dict[str, bytes]] = {s.name: {} for s in stages}
        self.remaining: dict[str, int] = {s.name: 0 for s in stages}
        self.store: list[CacheRow] = []
        self.ctx = BuildContext(trees=trees)
        self.versions = {s.name: s.version for s in stages}
        self.keep_facts = {n for s in stages for n in getattr(s, "reads_facts", ())}
        self.fts_fresh: set[str] = set()  # tables whose full-text index followed their stage
        self.fts_stale: set[str] = set()  # ... and that a later stage wrote again
        self.done = 0

    # ---------------------------------------------------------------- phases

    def run(self) -> BuildSummary:
        try:
            self.plan()
            if self.up_to_date():
                self.summary.up_to_date = True
                self.summary.seconds = time.perf_counter() - self.t0
                return self.summary
            self.write()
        except BaseException:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
            raise
        self.summary.seconds = time.perf_counter() - self.t0
        return self.summary

    def plan(self) -> None:
        """Inventory each stage group; its cache misses go to the workers right away."""
        unsent: list[workers.FileTask] = []  # tasks inventoried while too few to start workers
        for group in workers.submission_groups(self.stages):
            found: list[workers.Miss] = []
            for stage in group:
                plan = inventory(stage, Path(self.trees[stage.tree].root), self.cache)
                self.plans[stage.name] = plan
                self.diags += plan.diagnostics
                self.fp_parts += plan.fingerprint
                found += plan.misses
                self.remaining[stage.name] = len(plan.misses)
            self.misses += found
            if self.jobs <= 1 or not found:
                continue
            unsent += workers.file_tasks(found)
            if self.pool is None and len(self.misses) >= SERIAL_BELOW:
                self.pool = ProcessPoolExecutor(
                    max_workers=self.jobs, initializer=workers.worker_init
                )
            if self.pool is not None:
                for chunk in workers.chunks(unsent):
                    self.futures.add(self.pool.submit(workers.extract_chunk, chunk))
                unsent = []
        s = self.summary
        s.files = sum(len(p.rels) for p in self.plans.values())
        s.parsed = len(self.misses)
        s.cached = s.files - s.parsed
        s.timings.setdefault("(build)", {})["inventory"] = time.perf_counter() - self.t0

    def up_to_date(self) -> bool:
        """Nothing changed since the file at db_path was built: nothing to do."""
        return (
            self.has_old
            and not self.force
            and not self.misses
            and stored_fingerprint(self.db_path) == fingerprint(self.fp_parts)
        )

    def write(self) -> None:
        """Extract the misses and combine each stage into `<db>.tmp-<pid>`, then rename it."""
        sqlite_utils = kbdb.sqlite_utils_module()  # imported here: a no-op build never needs it
        tmp = atomic.tmp_path(self.db_path)  # beside the link's target when db_path is a link
        tmp.unlink(missing_ok=True)
        phases = self.summary.timings.setdefault("(build)", {})
        try:
            db = sqlite_utils.Database(tmp)
            db.execute("pragma journal_mode = off")
            db.execute("pragma synchronous = off")  # private until atomic.replace fsyncs it
            kbdb.create_tables(db)
            sources = tree_sources(self.trees)
            insert_rows(db, sources.values())
            t_phase = time.perf_counter()
            self.extract_and_combine(db, {k: s.id for k, s in sources.items()})
            phases["extract+combine"] = time.perf_counter() - t_phase
            t_phase = time.perf_counter()
            self.cache.store(self.store)
            phases["cache_store"] = time.perf_counter() - t_phase
            t_phase = time.perf_counter()
            # From the copy of the ingested rows (in finish) to the rename, ingests wait
            # (ckkb.kb.lock): each is in the old file before the copy, or goes into the new one.
            procs.fault_point("build-locking")
            writer = lock.acquire(self.db_path, "build")
            try:
                lock.recover(self.db_path, locked=True)
                self.finish(db)
                procs.fault_point("build-before-rename")
                atomic.replace(tmp, self.db_path)  # fsync; permissions kept; a link stays a link
                procs.fault_point("build-after-rename")
            finally:
                writer.release()
            phases["finish"] = time.perf_counter() - t_phase
        except BaseException as e:
            tmp.unlink(missing_ok=True)
            err = atomic.write_error(e, tmp)
            if err is not None:
                raise err from None
            raise

    def extract_and_combine(self, db: Any, source_ids: dict[str, int]) -> None:
        """Take the workers' results as they finish (a long task sent early, such as a worker
        group's, holds back no other); after each, combine every stage whose files are all in (in
        build order), while the workers go on with later files."""
        pending = list(self.stages)

        def combine_ready() -> None:
            while pending and self.remaining[pending[0].name] == 0:
                stage = pending.pop(0)
                self.combine(db, stage, source_ids[stage.tree])

        combine_ready()
        if self.pool is not None:
            while self.futures:
                finished, self.futures = wait(self.futures, return_when=FIRST_COMPLETED)
                for future in finished:
                    for result in future.result():
                        self.absorb(result)
                combine_ready()
            self.pool.shutdown(wait=True)
        else:
            for task in workers.file_tasks(self.misses):
                for result in workers.extract_file(*task):
                    self.absorb(result)
                combine_ready()
        combine_ready()

    def finish(self, db: Any) -> None:
        diags = self.summary.diagnostics = self.diags
        drows = [
            DiagnosticRow(
                stage=d.stage, file=d.file, line=d.line, severity=d.severity, message=d.message
            )
            for d in diags
        ]
        insert_rows(db, drows)
        if check_old(self.db_path):  # again, under the lock: an ingest may have made it since
            self.summary.carried = carry_ingested(db, self.db_path)
            procs.fault_point("build-carried")
        kbdb.finish_schema(db, fts_fresh=self.fts_fresh - self.fts_stale)
        kbdb.set_info(db, "fingerprint", fingerprint(self.fp_parts))
        kbdb.set_info(db, "ckkb_version", ckkb.__version__)
        kbdb.set_info(db, "built_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        kbdb.set_info(db, "trees", json.dumps({k: str(v.root) for k, v in self.trees.items()}))
        db.execute("analyze")
        db.conn.commit()
        db.close()

    # ---------------------------------------------------------------- per file, per stage

    def timing(self, name: str) -> dict[str, float]:
        return self.summary.timings.setdefault(
            name, {"extract_cpu": 0.0, "combine": 0.0, "combine_cpu": 0.0, "insert": 0.0}
        )

    def absorb(self, result: workers.Extracted) -> None:
        """One extracted (stage, file): keep its result for the combine and for the cache."""
        stage_name, rel, size, mtime, sha, blob, cpu, done_at = result
        tm = self.timing(stage_name)
        tm["extract_cpu"] += cpu
        tm["extracted_at"] = max(tm.get("extracted_at", 0.0), done_at - self.t0)
        self.blobs[stage_name][rel] = blob
        plan = self.plans[stage_name]
        version = self.versions[stage_name]
        self.fp_parts.append((stage_name, version, rel, sha))
        if size >= 0:
            self.store.append((stage_name, version, str(plan.root), rel, size, mtime, sha, blob))
        self.remaining[stage_name] -= 1
        self.done += 1
        if self.progress and (self.done % 16 == 0 or self.done == len(self.misses)):
            self.progress("parse", self.done, len(self.misses))  # a redraw per file costs more

    def combine(self, db: Any, stage: Stage, source_id: int) -> None:
        """Combine one stage's file results with the rows it reads, insert and index its rows."""
        plan = self.plans[stage.name]
        if self.progress:
            self.progress(f"combine {stage.name}", 0, 1)
        blobs = self.blobs.pop(stage.name)
        if plan.hits:
            cached = self.cache.blobs(stage, str(plan.root))
            for rel in plan.hits:
                blobs.setdefault(rel, cached[rel])
        per_file = {rel: pickle.loads(blobs[rel]) for rel in plan.rels if rel in blobs}
        for fr in per_file.values():
            self.diags.extend(fr.diagnostics)
        if stage.name in self.keep_facts:
            self.ctx.facts[stage.name] = {rel: fr.facts for rel, fr in per_file.items()}
        t_combine = time.perf_counter()
        cpu_combine = time.process_time()
        try:
            res = stage.combine(plan.root, per_file, self.ctx.for_stage(stage))
        except StageError:
            raise  # a stage's declarations are wrong: a bug to fix, not a tree's diagnostic
        except Exception as e:
            message = f"{stage.name} failed: {type(e).__name__}: {e}"
            res = StageResult(
                diagnostics=[Diagnostic(str(plan.root), 0, message, "error", stage.name)]
            )
        self.diags.extend(res.diagnostics)
        for r in res.rows:
            self.ctx.rows.setdefault(type(r).__table__, []).append(r)
        tm = self.timing(stage.name)
        t_insert = time.perf_counter()
        tm["combine_cpu"] += time.process_time() - cpu_combine
        counts = insert_rows(db, res.rows, source_id)
        check_writes(stage, counts)
        # index what this stage wrote now, while the workers still extract (a later stage that
        # writes the same table inserts into an indexed table: slower, same rows), not at the end;
        # full-text indexes too, for a table no earlier stage wrote (written again: redone at end)
        kbdb.create_indexes(db, counts)
        fts_now = {t for t in counts if TABLES[t].fts}
        self.fts_stale.update(fts_now & self.fts_fresh)
        kbdb.create_fts(db, fts_now - self.fts_fresh)
        self.fts_fresh.update(fts_now)
        tm["combine"] += t_insert - t_combine
        tm["insert"] += time.perf_counter() - t_insert
        for k, v in counts.items():
            self.summary.tables[k] = self.summary.tables.get(k, 0) + v
        tm["combined_at"] = time.perf_counter() - self.t0
        if self.progress:
            self.progress(f"combine {stage.name}", 1, 1)
