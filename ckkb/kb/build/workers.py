"""Per-file extraction, run in worker processes (or in-process for small builds).

A file is read and hashed once and extracted for every stage that reads it with the same bytes
(`extract_with`); files are cut into chunks of about CHUNK_BYTES per worker task. Nothing here
touches the database.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from pathlib import Path

from ckkb import procs
from ckkb.diagnostics import Diagnostic
from ckkb.extract.cpp import shared_parses
from ckkb.kb.stages import FileResult, Stage, dependencies, get_stage

# stage, root, rel, size, mtime_ns, sha256, pickled FileResult, CPU seconds, done at (perf_counter)
Extracted = tuple[str, str, str, int, int, str, bytes, float, float]
FileTask = tuple[str, str, tuple[str, ...]]  # root, rel, the stages that read it (in build order)
Miss = tuple[str, str, str]  # stage, root, rel: a file whose cached result is missing or stale

WORKER_NICENESS = 10
CHUNK_BYTES = 256 * 1024  # input per worker task: few round trips, small enough to balance two
CHUNK_FILES = 32


def extract_file(root: str, rel: str, stage_names: tuple[str, ...]) -> list[Extracted]:
    """Read and hash one file once and extract it for every stage that reads it, in a row.
    Never raises: failures become diagnostics."""
    t0 = time.process_time()
    path = Path(root) / rel
    try:
        st = path.stat()
        data = path.read_bytes()
    except OSError as e:
        return [_unreadable(name, root, rel, e, t0) for name in stage_names]
    sha = hashlib.sha256(data).hexdigest()
    out = []
    with shared_parses():  # stages that parse the same bytes share one parse
        for stage_name in stage_names:
            try:
                res = get_stage(stage_name).extract(Path(root), rel, data)
            except Exception as e:  # an extractor bug must not lose the rest of the tree
                message = f"extractor failed: {type(e).__name__}: {e}"
                res = FileResult(diagnostics=[Diagnostic(rel, 0, message, "error", stage_name)])
            blob = pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL)
            t1 = time.process_time()
            out.append(
                (
                    stage_name,
                    root,
                    rel,
                    st.st_size,
                    st.st_mtime_ns,
                    sha,
                    blob,
                    t1 - t0,
                    time.perf_counter(),
                )
            )
            t0 = t1
    return out


def _unreadable(stage_name: str, root: str, rel: str, e: OSError, t0: float) -> Extracted:
    diag = Diagnostic(rel, 0, f"cannot read: {e.strerror or e}", "error", stage_name)
    blob = pickle.dumps(FileResult(diagnostics=[diag]))
    cpu = time.process_time() - t0
    return (stage_name, root, rel, -1, -1, "", blob, cpu, time.perf_counter())


def worker_init() -> None:
    """A worker runs at a lower priority than the parent: the parent's combines are the build's
    critical path (each waits for the one before it), a worker's next file can wait a moment.
    And it dies with the parent: a build killed by `kill -9` takes its workers with it."""
    procs.die_with_parent()
    try:
        os.nice(WORKER_NICENESS)
    except OSError:  # not permitted here: same priority, same result
        pass


def extract_chunk(tasks: list[FileTask]) -> list[Extracted]:
    return [r for t in tasks for r in extract_file(*t)]


def file_tasks(misses: list[Miss]) -> list[FileTask]:
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


def _size(root: str, rel: str) -> int:
    try:
        return os.stat(os.path.join(root, rel)).st_size
    except OSError:
        return 0


def chunks(tasks: list[FileTask]) -> list[list[FileTask]]:
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


def tree_chunks(batches: list[tuple[int, list[FileTask]]]) -> list[list[FileTask]]:
    """`chunks` of (tree rank, tasks) batches in order: consecutive batches of one tree are
    chunked as one list (as a single-tree build's groups are), another tree's apart, so each
    tree's files of a stage group go out together, the earlier tree's first."""
    joined: list[list[FileTask]] = []
    last = None
    for rank, tasks in batches:
        if rank != last or not joined:
            joined.append([])
        joined[-1] += tasks
        last = rank
    return [c for tasks in joined for c in chunks(tasks)]


def submission_groups(stages: list[Stage]) -> list[list[Stage]]:
    """Stages in the order their files are inventoried and handed to the workers: build order,
    except that a stage that extracts with another (`extract_with`) comes right after it (its tasks
    must be known before the other's go out, or the two would parse a file twice), and the later
    stages of its `worker_group` go out with it (one worker reads them, see chunks). Groups with a
    worker group go out first: one worker reads all of one, so it starts while the others share
    the rest, and the build does not end on one worker reading it alone. Right after them go the
    groups whose combine waits only on stages of those, or on stages that do (aiter.configs on
    aiter.tuners, the aiter audit on both): combined while the parent waits for the CK instance
    lists, not after the CK chain, at the end."""
    rest = list(stages)
    groups: list[list[Stage]] = []
    while rest:
        group = [rest.pop(0)]
        for s in list(rest):
            if getattr(s, "extract_with", None) in {g.name for g in group}:
                rest.remove(s)
                group.append(s)
        wg = getattr(group[-1], "worker_group", None)
        if wg is not None:
            for s in [s for s in rest if getattr(s, "worker_group", None) == wg]:
                rest.remove(s)
                group.append(s)
        groups.append(group)
    grouped = {s.name for g in groups for s in g if getattr(s, "worker_group", None) is not None}
    needs = dependencies(stages)
    early = set(grouped)  # ... and the stages that wait only on those, however far down
    waiting = [s.name for s in stages if needs[s.name]]
    while more := {n for n in waiting if n not in early and needs[n] <= early}:
        early |= more

    def rank(g: list[Stage]) -> int:
        if any(getattr(s, "worker_group", None) is not None for s in g):
            return 0
        return 1 if all(s.name in early for s in g) else 2

    return sorted(groups, key=rank)
