"""One `ckkb build`: inventory, extraction in workers, each stage's combine, the new database.

- Atomic: rows go into `<db>.tmp-<pid>`, renamed over the old file only when everything worked, so
  an interrupted or failed build leaves the previous database untouched.
- Ingested data (races, results, harness measurements) is copied forward from the old file.
- Cached: per (stage, file), keyed by size+mtime, then sha256 (`cache.Cache`), so a rebuild only
  re-extracts what changed; when no input of any stage changed, the build is a no-op.
- Parallel: cache misses go to a process pool as each stage group is inventoried, so extraction
  overlaps the rest of the inventory; this process combines each stage as soon as its files are
  in and the stages it reads from are combined (preferring the order `build_order` derives from
  what stages read and write), and indexes its tables right away.
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ckkb
from ckkb import procs, settings
from ckkb.diagnostics import Diagnostic
from ckkb.errors import CkkbError
from ckkb.kb import atomic, lock
from ckkb.kb import db as kbdb
from ckkb.kb.build import gc_policy, workers
from ckkb.kb.build.cache import Cache, CacheRow
from ckkb.kb.build.extend import add_fts_rows, add_fts_since, copy_base, extends, fts_marks
from ckkb.kb.build.plan import StagePlan, inventory, same_bytes
from ckkb.kb.build.reuse import copy_tree_rows, old_built, old_trees, stored_tree
from ckkb.kb.build.shared_rows import shared_rows
from ckkb.kb.build.writer import (
    FingerprintPart,
    carry_ingested,
    check_old,
    fingerprint,
    insert_rows,
    stored_fingerprint,
    tree_fingerprint,
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
    dependencies,
    one_build,
    register_stages,
)
from ckkb.sources import NamedTree, named_tree

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
    extended: bool = False  # the new file started as a copy of the old one (`extend`)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # stage -> {"extract_cpu": CPU seconds in workers, "combine": seconds, "combine_cpu": CPU
    # seconds of the combine (this process, so not inflated by busy workers), "insert": seconds,
    # "extracted_at" and "combined_at": seconds since the build started when a worker finished
    # its last file / its rows were in}
    timings: dict[str, dict[str, float]] = field(default_factory=dict)


def build(
    db_path: str | Path,
    trees: dict[str, Any] | list[NamedTree],
    *,
    stages: list[Stage],
    jobs: int | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> BuildSummary:
    """Build the knowledge base at db_path from exactly `trees` (named trees, any number of each
    kind, or {"ck": CkTree, "aiter": AiterTree}) with `stages` (all of them:
    `ckkb.pipeline.stages()`); stages of kinds no tree has are left out. The first tree of each
    kind is the one queries read by default. Adding to the trees a database already holds is the
    caller's choice (`ckkb.kb.build.trees.merged`)."""
    path = Path(db_path)
    named = _named(trees)
    kinds = {t.kind for t in named}
    ordered = build_order([s for s in stages if s.tree in kinds])
    register_stages(ordered)
    run = _Build(path, named, ordered, jobs or settings.jobs(), force, progress)
    try:
        with gc_policy.relaxed(), one_build(run.cache):
            return run.run()
    finally:
        run.cache.close()


def _named(trees: dict[str, Any] | list[NamedTree]) -> list[NamedTree]:
    """Named trees in source-id order; a mapping (the single-tree form) in kind order."""
    if isinstance(trees, dict):
        named = [named_tree(t, kind=k) for k, t in sorted(trees.items())]
        if len({t.name for t in named}) < len(named):  # a CK and an aiter tree of one name
            named = [replace(t, name=f"{t.kind}-{t.name}") for t in named]
    else:
        named = list(trees)
    seen: dict[str, NamedTree] = {}
    for t in named:
        if t.name in seen:
            raise BuildTreesError(f"two trees are named {t.name!r}: {seen[t.name].root}, {t.root}")
        seen[t.name] = t
    roots = [str(t.root) for t in named]
    dup = {r for r in roots if roots.count(r) > 1}
    if dup:
        raise BuildTreesError(f"the same tree is given twice: {sorted(dup)[0]}")
    return named


class BuildTreesError(CkkbError):
    """Trees that cannot be built together (a name or a path given twice)."""


@dataclass(frozen=True)
class _Unit:
    """One stage run over one tree; `rank` is the tree's place among the trees of its kind."""

    stage: Stage
    tree: NamedTree
    rank: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.stage.name, self.tree.name)


class _Build:
    """The state of one build, phase by phase: plan, extract and combine, finish."""

    def __init__(
        self,
        db_path: Path,
        trees: list[NamedTree],
        stages: list[Stage],
        jobs: int,
        force: bool,
        progress: Progress | None,
    ) -> None:
        self.t0 = time.perf_counter()
        self.db_path = db_path
        self.trees = trees
        self.jobs = jobs
        self.force = force
        self.progress = progress
        self.summary = BuildSummary(db_path=db_path)
        lock.clean_temp(db_path)  # left by builds killed before their rename
        lock.recover(db_path)  # a hot journal left by a killed ingest
        self.has_old = check_old(db_path)
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self.cache = Cache(db_path.with_name(db_path.name + ".cache"))
        ranks: dict[str, int] = {}
        rank_of = {}
        for t in trees:
            rank_of[t.name] = ranks.get(t.kind, 0)
            ranks[t.kind] = rank_of[t.name] + 1
        # rank by rank (the first tree of each kind, then the second...), build order within one
        self.units = [
            _Unit(s, t, rank_of[t.name])
            for r in range(max(ranks.values(), default=0))
            for s in stages
            for t in trees
            if t.kind == s.tree and rank_of[t.name] == r
        ]
        self.by_root = {str(t.root): t.name for t in trees}
        self.plans: dict[tuple[str, str], StagePlan] = {}
        self.misses: list[workers.Miss] = []
        self.fp_parts: list[FingerprintPart] = [
            ("tree", t.name, t.kind, str(t.root)) for t in trees
        ] + [("stage", s.name, s.version, "") for s in stages]
        self.tree_parts: dict[str, list[FingerprintPart]] = {t.name: [] for t in trees}
        self.diags: dict[str, list[Diagnostic]] = {t.name: [] for t in trees}
        self.pool: ProcessPoolExecutor | None = None
        self.futures: set[Future[list[workers.Extracted]]] = set()
        self.blobs: dict[tuple[str, str], dict[str, bytes]] = {u.key: {} for u in self.units}
        self.remaining: dict[tuple[str, str], int] = {u.key: 0 for u in self.units}
        self.store: list[CacheRow] = []
        self.ctx = {t.name: BuildContext(trees={t.kind: t.tree}) for t in trees}
        self.versions = {s.name: s.version for s in stages}
        self.keep_facts = {n for s in stages for n in getattr(s, "reads_facts", ())}
        # tables whose full-text index followed their stage (a later stage or tree adds its rows)
        self.fts_fresh: set[str] = set()
        self.fts_stale: set[str] = set()  # ... and that a later stage replaced rows of
        self.reused: dict[str, int] = {}  # tree name -> its rows' source id in the old database
        # tree name -> the earlier tree of this build whose rows it reads (`shared_rows`)
        self.rows_of: dict[str, str] = {}
        self.source_ids: dict[str, int] = {}  # tree name -> its source id in the new one
        self.extending = False  # the new file starts as a copy of the old one (`extend`)
        # a miss of an earlier tree, by (stage, rel); the later trees' misses of the same bytes
        # at the same path, by the earlier one's (stage, root, rel): extracted once (`pair`)
        self.first_miss: dict[tuple[str, str], str] = {}
        self.twins: dict[workers.Miss, list[tuple[str, int, int, str]]] = {}
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
        """Inventory each stage group, tree by tree (the first tree of each kind first); cache
        misses go to the workers right away. The trees' files go out group by group, not tree by
        tree: a later tree's early stages (its CMake) are in, and combined, while the workers
        read the instance lists, instead of its whole chain of combines waiting for every file
        of the earlier trees and running alone at the end. A tree whose every file is cached,
        with the same contents as a tree the old database holds, is not combined again: its rows
        are copied (`reuse`)."""
        # tasks inventoried while too few to start workers: (rank, tasks) per (group, tree)
        unsent: list[tuple[int, list[workers.FileTask]]] = []
        old = old_trees(self.db_path) if self.has_old and not self.force else {}
        ranks = sorted({u.rank for u in self.units})
        stages = list({u.stage.name: u.stage for u in self.units}.values())  # build order
        for group in workers.submission_groups(stages):
            names = [st.name for st in group]
            # an earlier tree's files first: a later tree's twin of one is paired with it
            # (`pair`), and each tree's files of the group go out together (`chunks` sorts them)
            for r in ranks:
                found: list[workers.Miss] = []
                for unit in sorted(
                    (u for u in self.units if u.rank == r and u.stage.name in names),
                    key=lambda u: names.index(u.stage.name),
                ):
                    plan = inventory(unit.stage, Path(unit.tree.root), self.cache)
                    self.plans[unit.key] = plan
                    self.diags[unit.tree.name] += plan.diagnostics
                    self.tree_parts[unit.tree.name] += plan.fingerprint
                    plan.misses, twins = self.pair(plan.misses)
                    found += plan.misses
                    self.remaining[unit.key] = len(plan.misses) + twins
                self.misses += found
                if self.jobs <= 1 or not found:
                    continue
                unsent.append((r, workers.file_tasks(found)))
                if self.pool is None and len(self.misses) >= SERIAL_BELOW:
                    self.pool = ProcessPoolExecutor(
                        max_workers=self.jobs, initializer=workers.worker_init
                    )
                if self.pool is not None:
                    for chunk in workers.tree_chunks(unsent):
                        self.futures.add(self.pool.submit(workers.extract_chunk, chunk))
                    unsent = []
        for t in self.trees:
            if any(self.remaining[u.key] for u in self.units if u.tree.name == t.name):
                continue
            same = old.get((t.kind, tree_fingerprint(t.kind, self.tree_parts[t.name])))
            if same is not None:
                self.reused[t.name] = same
        self.rows_of = shared_rows(
            self.trees, self.plans, self.tree_parts, self.twins, self.versions
        )
        self.fp_parts += [
            (f"{stage}@{tree}", version, rel, sha)
            for tree, parts in self.tree_parts.items()
            for stage, version, rel, sha in parts
        ]
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
        self.source_ids = {t.name: i for i, t in enumerate(self.trees, start=1)}
        self.extending = (
            self.has_old
            and not self.force
            and extends(self.db_path, self.reused, self.source_ids, self.rows_of)
        )
        self.summary.extended = self.extending
        try:
            if self.extending:
                copy_base(self.db_path, tmp)
            db = sqlite_utils.Database(tmp)
            db.execute("pragma journal_mode = off")
            db.execute("pragma synchronous = off")  # private until atomic.replace fsyncs it
            # 64 MiB of page cache (SQLite's default: 2 MiB): the ~110 MB of rows, their indexes
            # and full-text indexes are written with fewer page spills (-0.1 CPU-s of writes)
            db.execute(f"pragma cache_size = -{64 * 1024}")
            kbdb.create_tables(db)
            t_phase = time.perf_counter()
            self.copy_reused(db)
            self.extract_and_combine(db)
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

    def copy_reused(self, db: Any) -> None:
        """The rows (and diagnostics) of each unchanged tree, from the old database."""
        for name, old_id in self.reused.items():
            if name in self.rows_of:
                continue  # reads an earlier tree's rows
            if self.extending and old_id == self.source_ids[name]:
                counts, diags = stored_tree(db, old_id)  # in the copied file already
            else:
                counts, diags = copy_tree_rows(db, self.db_path, old_id, self.source_ids[name])
            self.diags[name] += diags
            for k, v in counts.items():
                self.summary.tables[k] = self.summary.tables.get(k, 0) + v

    def extract_and_combine(self, db: Any) -> None:
        """Take the workers' results as they finish (a long task sent early, such as a worker
        group's, holds back no other); after each, combine every stage whose files are all in and
        whose dependencies (in its tree) are combined, the first in build order first, while the
        workers go on with later files. A stage nothing waits on (the aiter ones) is thus combined
        while this process would otherwise wait for the CK instance lists, not after the CK
        chain."""
        held = set(self.reused) | set(self.rows_of)  # trees whose rows are there already
        pending = [u for u in self.units if u.tree.name not in held]
        needs = dependencies(list({u.stage.name: u.stage for u in self.units}.values()))
        # a dependency is the stage run over the same tree (`check_reads`: a stage reads its own
        # tree's rows only)
        waits = {
            u.key: {
                d.key
                for d in self.units
                if d.stage.name in needs[u.stage.name] and d.tree.name == u.tree.name
            }
            for u in pending
        }
        waiting = {u.key for u in pending}
        combined = {u.key for u in self.units if u.key not in waiting}  # rows reused or shared

        def ready(unit: _Unit) -> bool:
            return self.remaining[unit.key] == 0 and waits[unit.key] <= combined

        def combine_ready() -> None:
            while unit := next((u for u in pending if ready(u)), None):
                pending.remove(unit)
                self.combine(db, unit)
                combined.add(unit.key)

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
        built = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        old = old_built(self.db_path) if self.has_old else {}
        rows = tree_sources(self.trees, self.source_ids)
        for t, row in zip(self.trees, rows, strict=True):
            if t.name in self.rows_of:
                row.rows_of = self.source_ids[self.rows_of[t.name]]
                self.diags[t.name] = list(self.diags[self.rows_of[t.name]])
            row.files = sum(len(p.rels) for k, p in self.plans.items() if k[1] == t.name)
            row.fingerprint = tree_fingerprint(t.kind, self.tree_parts[t.name])
            row.built = old.get(t.name, built) if t.name in self.reused else built
        insert_rows(db, rows)
        self.summary.diagnostics = [d for t in self.trees for d in self.diags[t.name]]
        for t in self.trees:
            if t.name in self.reused or t.name in self.rows_of:
                continue  # copied with the tree's rows, or an earlier tree's
            drows = [
                DiagnosticRow(
                    stage=d.stage, file=d.file, line=d.line, severity=d.severity, message=d.message
                )
                for d in self.diags[t.name]
            ]
            insert_rows(db, drows, self.source_ids[t.name])
        if check_old(self.db_path):  # again, under the lock: an ingest may have made it since
            self.summary.carried = carry_ingested(db, self.db_path)
            procs.fault_point("build-carried")
        if self.extending:
            new = {
                self.source_ids[t.name]
                for t in self.trees
                if self.reused.get(t.name) != self.source_ids[t.name] and t.name not in self.rows_of
            }
            add_fts_rows(db, new)
            self.fts_fresh = {t.name for t in TABLES.values() if t.fts}
        kbdb.finish_schema(db, fts_fresh=self.fts_fresh - self.fts_stale)
        kbdb.set_info(db, "fingerprint", fingerprint(self.fp_parts))
        kbdb.set_info(db, "ckkb_version", ckkb.__version__)
        kbdb.set_info(db, "built_at", built)
        first: dict[str, str] = {}
        for t in self.trees:
            first.setdefault(t.kind, str(t.root))
        kbdb.set_info(db, "trees", json.dumps(dict(sorted(first.items()))))
        db.execute("analyze")
        db.conn.commit()
        db.close()

    # ---------------------------------------------------------------- per file, per stage

    def timing(self, name: str) -> dict[str, float]:
        return self.summary.timings.setdefault(
            name, {"extract_cpu": 0.0, "combine": 0.0, "combine_cpu": 0.0, "insert": 0.0}
        )

    def pair(self, misses: list[workers.Miss]) -> tuple[list[workers.Miss], int]:
        """The misses to extract, and how many others are twins of an earlier tree's miss (the
        same bytes at the same path: its result is theirs, `absorb`)."""
        rest: list[workers.Miss] = []
        twins = 0
        for stage, root, rel in misses:
            first = self.first_miss.get((stage, rel))
            same = same_bytes(first, root, rel) if first is not None else None
            if first is None or same is None:
                self.first_miss.setdefault((stage, rel), root)
                rest.append((stage, root, rel))
                continue
            self.twins.setdefault((stage, first, rel), []).append((root, *same))
            twins += 1
        return rest, twins

    def absorb(self, result: workers.Extracted, twin: bool = False) -> None:
        """One extracted (stage, file): keep its result for the combine and for the cache, and
        for each later tree's twin of the file."""
        stage_name, root, rel, size, mtime, sha, blob, cpu, done_at = result
        for other, o_size, o_mtime, o_sha in self.twins.pop((stage_name, root, rel), []):
            self.absorb((stage_name, other, rel, o_size, o_mtime, o_sha, blob, 0.0, done_at), True)
        tree = self.by_root[root]
        key = (stage_name, tree)
        tm = self.timing(stage_name)
        tm["extract_cpu"] += cpu
        tm["extracted_at"] = max(tm.get("extracted_at", 0.0), done_at - self.t0)
        self.blobs[key][rel] = blob
        version = self.versions[stage_name]
        self.tree_parts[tree].append((stage_name, version, rel, sha))
        self.fp_parts.append((f"{stage_name}@{tree}", version, rel, sha))
        if size >= 0:
            self.store.append((stage_name, version, root, rel, size, mtime, sha, blob))
        self.remaining[key] -= 1
        if twin:
            return  # not a file the workers parsed
        self.done += 1
        if self.progress and (self.done % 16 == 0 or self.done == len(self.misses)):
            self.progress("parse", self.done, len(self.misses))  # a redraw per file costs more

    def combine(self, db: Any, unit: _Unit) -> None:
        """Combine one stage's file results with the rows it reads, insert and index its rows."""
        stage = unit.stage
        plan = self.plans[unit.key]
        ctx = self.ctx[unit.tree.name]
        if self.progress:
            self.progress(f"combine {stage.name}", 0, 1)
        blobs = self.blobs.pop(unit.key)
        if plan.hits:
            cached = self.cache.blobs(stage, str(plan.root))
            for rel in plan.hits:
                if rel in plan.borrowed:
                    blobs.setdefault(rel, self.borrow(stage, plan, rel))
                else:
                    blobs.setdefault(rel, cached[rel])
        per_file = {rel: pickle.loads(blobs[rel]) for rel in plan.rels if rel in blobs}
        diags = self.diags[unit.tree.name]
        for fr in per_file.values():
            diags.extend(fr.diagnostics)
        if stage.name in self.keep_facts:
            ctx.facts[stage.name] = {rel: fr.facts for rel, fr in per_file.items()}
        t_combine = time.perf_counter()
        cpu_combine = time.process_time()
        try:
            res = stage.combine(plan.root, per_file, ctx.for_stage(stage))
        except StageError:
            raise  # a stage's declarations are wrong: a bug to fix, not a tree's diagnostic
        except Exception as e:
            message = f"{stage.name} failed: {type(e).__name__}: {e}"
            res = StageResult(
                diagnostics=[Diagnostic(str(plan.root), 0, message, "error", stage.name)]
            )
        diags.extend(res.diagnostics)
        for r in res.rows:
            ctx.rows.setdefault(type(r).__table__, []).append(r)
        tm = self.timing(stage.name)
        t_insert = time.perf_counter()
        tm["combine_cpu"] += time.process_time() - cpu_combine
        marks = fts_marks(db, self.fts_fresh & set(stage.writes)) if not self.extending else {}
        counts = insert_rows(db, res.rows, self.source_ids[unit.tree.name])
        check_writes(stage, counts)
        # index what this stage wrote now, while the workers still extract (a later stage that
        # writes the same table inserts into an indexed table: slower, same rows), not at the end;
        # full-text indexes too: built for a table no earlier stage or tree wrote, else given the
        # rows this one added
        kbdb.create_indexes(db, counts)
        if not self.extending:  # extending: the added trees' rows are full-text indexed at the end
            fts_now = {t for t in counts if TABLES[t].fts}
            again = {t: marks[t] for t in fts_now & self.fts_fresh}
            self.fts_stale |= add_fts_since(db, again, counts)
            kbdb.create_fts(db, fts_now - self.fts_fresh)
            self.fts_fresh.update(fts_now)
        tm["combine"] += t_insert - t_combine
        tm["insert"] += time.perf_counter() - t_insert
        for k, v in counts.items():
            self.summary.tables[k] = self.summary.tables.get(k, 0) + v
        tm["combined_at"] = time.perf_counter() - self.t0
        if self.progress:
            self.progress(f"combine {stage.name}", 1, 1)

    def borrow(self, stage: Stage, plan: StagePlan, rel: str) -> bytes:
        """Another tree's cached result for the same bytes, cached for this tree too."""
        other_root, size, mtime, sha = plan.borrowed[rel]
        blob = self.cache.blob(stage, other_root, rel)
        if blob is None:  # the cache lost it since the inventory: extract it here
            blob = workers.extract_file(str(plan.root), rel, (stage.name,))[0][6]
        self.store.append((stage.name, stage.version, str(plan.root), rel, size, mtime, sha, blob))
        return blob
