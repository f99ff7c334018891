"""The fleet driver: a Dask cluster, one task per shape (and pass), results into a bundle as they
come. Dask does the scheduling; this module only asks it.

- `--gpus`: a local cluster (Dask's SpecCluster, which LocalCluster is built on) of one Nanny
  worker per GPU, each with `resources={"GPU": 1}`, one thread, and the pinning environment of
  its GPU (ckkb.fleet.gpus.pin_env). A worker that dies is restarted by its Nanny.
- `--scheduler ADDRESS`: an existing cluster; its workers must offer the resource `GPU`.
- Every task asks for `GPU=1`. Dask re-queues the task of a worker lost mid-shape; the scheduler's
  `allowed-failures` (2 on our local cluster: the third loss fails the shape) bounds that, and a
  profiler crash is retried by Dask's `retries=2` (three tries). Both end as failed records.
- `as_completed` hands each finished shape back; its records go to the bundle at once (JSON
  lines, flushed and fsynced per shape), skipping any key already written.
- SIGINT (KeyboardInterrupt): cancel what is queued, kill every worker's ckProfiler process groups
  (`client.run(kill_children)`), close the cluster, then re-raise.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb import __version__
from ckkb.errors import CkkbError
from ckkb.fleet.gpus import Gpu, pin_env

ALLOWED_FAILURES = 2  # a shape whose worker dies a third time is recorded as failed
RETRIES = 2  # a profiler crash is tried three times in all
WINDOW_PER_GPU, WINDOW_MIN = 4, 64  # jobs submitted ahead: per GPU worker, and at least


def require_dask() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise CkkbError(
            "--gpus and --scheduler need Dask: pip install 'ckkb[fleet]' (dask[distributed])"
        ) from None


@dataclass
class Job:
    """One unit of work: a shape (and pass). `fail(cause)` gives the records of a failed job."""

    key: str
    fn: Callable[[dict[str, Any]], dict[str, Any]]
    payload: dict[str, Any]
    label: str
    fail: Callable[[str, dict[str, Any] | None], list[dict[str, Any]]]


@dataclass
class Outcome:
    written: int = 0
    skipped: int = 0
    failed: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    wall_seconds: float = 0.0


class StreamingBundle:
    """A JSON-lines bundle appended to as results arrive: flushed and fsynced per shape, so an
    interrupted run leaves a valid partial bundle. A record whose `key` was written is skipped."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.keys: set[str] = set()
        self.f = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        if self.f.tell() == 0:
            self.f.write(json.dumps(header) + "\n")
            self._sync()

    def _sync(self) -> None:
        self.f.flush()
        os.fsync(self.f.fileno())

    def write(self, records: list[dict[str, Any]]) -> tuple[int, int]:
        n = skipped = 0
        for rec in records:
            k = rec.get("key")
            if k is not None and k in self.keys:
                skipped += 1
                continue
            if k is not None:
                self.keys.add(k)
            self.f.write(json.dumps(rec, allow_nan=False) + "\n")
            n += 1
        self._sync()
        return n, skipped

    def close(self) -> None:
        self.f.close()


def driver_facts() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "ckkb": __version__}


def local_cluster(gpus: list[Gpu], runtime: str) -> Any:
    """One Nanny worker per GPU, pinned through its environment, offering GPU=1."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {
        f"gpu{g.index}": {
            "cls": Nanny,
            "options": {
                "nthreads": 1,
                "resources": {"GPU": 1},
                "env": pin_env(g.index, runtime),
                "host": "127.0.0.1",
                "dashboard": False,
                "silence_logs": logging.ERROR,
                "preload": ["ckkb.fleet.worker_setup"],  # ignores SIGINT: the driver handles it
            },
        }
        for g in gpus
    }
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
        return SpecCluster(
            workers=workers,
            scheduler={
                "cls": Scheduler,
                "options": {"host": "127.0.0.1", "dashboard_address": None, "dashboard": False},
            },
            silence_logs=logging.ERROR,
            name="ckkb-fleet",
        )


def _connect(scheduler: str | None, gpus: list[Gpu] | None, runtime: str) -> tuple[Any, Any]:
    from distributed import Client

    cluster = None
    if scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise CkkbError(f"--scheduler {scheduler}: cannot connect ({e})") from None
    else:
        cluster = local_cluster(gpus or [], runtime)
        client = Client(cluster)
    try:
        client.wait_for_workers(1, timeout=60)
    except TimeoutError:
        client.close()
        raise CkkbError(f"--scheduler {scheduler}: no worker joined within 60 s") from None
    offer = [w for w in client.scheduler_info()["workers"].values() if w["resources"].get("GPU")]
    if not offer:
        client.close()
        if cluster is not None:
            cluster.close()
        raise CkkbError(
            f"--scheduler {scheduler}: no worker offers the resource GPU",
            hint="one worker per GPU: HIP_VISIBLE_DEVICES=i dask worker ADDR --resources GPU=1",
        )
    return client, cluster


def _reap(client: Any) -> None:
    """Kill every ckProfiler process group on every worker (used on SIGINT)."""
    from ckkb.fleet.tasks import kill_children

    try:
        client.run(kill_children, on_error="return")
    except Exception:
        pass


def run_jobs(
    jobs: list[Job],
    out: Path,
    header: dict[str, Any],
    *,
    gpus: list[Gpu] | None = None,
    scheduler: str | None = None,
    runtime: str = "rocm",
    echo: Callable[[str], None] | None = None,
) -> Outcome:
    """Submit every job (GPU=1 each, in order), write each finished shape's records."""
    from distributed import as_completed
    from distributed.diagnostics.plugin import WorkerPlugin

    class ChildReaper(WorkerPlugin):
        """Kills a worker's ckProfiler process groups when the worker closes."""

        name = "ckkb-child-reaper"

        def teardown(self, worker: Any) -> None:

            from ckkb.fleet.tasks import kill_children

            kill_children()

    t0 = time.monotonic()
    client, cluster = _connect(scheduler, gpus, runtime)
    bundle = StreamingBundle(out, header)
    outcome = Outcome()
    futures: set[Any] = set()  # in flight, for SIGINT
    try:
        client.register_plugin(ChildReaper())
        by_key = {j.key: j for j in jobs}
        pending = iter(enumerate(jobs))

        def submit_next() -> Any:
            nxt = next(pending, None)
            if nxt is None:
                return None
            i, j = nxt
            fut = client.submit(
                j.fn,
                j.payload,
                key=j.key,
                resources={"GPU": 1},
                retries=RETRIES,
                priority=len(jobs) - i,
                pure=False,
            )
            futures.add(fut)
            return fut

        # A window of jobs in flight, refilled as each finishes: the scheduler holds a few
        # tasks per GPU, not the whole run (a full race is millions of shapes).
        gpus_now = sum(
            1 for w in client.scheduler_info()["workers"].values() if w["resources"].get("GPU")
        )
        window = max(WINDOW_MIN, WINDOW_PER_GPU * gpus_now)
        ac = as_completed([f for f in (submit_next() for _ in range(window)) if f is not None])
        for fut in ac:
            nxt = submit_next()
            if nxt is not None:
                ac.add(nxt)
            futures.discard(fut)
            job = by_key[fut.key]
            received = time.time()
            if fut.status == "finished":
                res = fut.result()
                records, status = res["records"], "ok"
                task = dict(res["task"], received=received)
            else:
                exc = fut.exception()
                records, task = _failed(job, exc)
                status = "failed"
                outcome.failed += 1
            for rec in records:  # when and where: for the scheduling cost (fleet_compare.py)
                rec.setdefault("task", task)
            n, skipped = bundle.write(records)
            outcome.written += n
            outcome.skipped += skipped
            outcome.tasks.append({"label": job.label, "status": status, **task})
            outcome.rows.append({"shape": job.label, "status": status, **_brief(records, task)})
            if echo:
                echo(f"{task.get('worker') or '-'} {job.label}: {status}\n")
            fut.release()
    except KeyboardInterrupt:
        client.cancel(list(futures), force=True)
        _reap(client)
        raise
    finally:
        bundle.close()
        client.close()
        if cluster is not None:
            cluster.close()
    outcome.wall_seconds = time.monotonic() - t0
    return outcome


def _failed(job: Job, exc: BaseException | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from distributed import KilledWorker

    from ckkb.fleet.tasks import ProfilerCrashed

    if isinstance(exc, ProfilerCrashed):
        last = exc.args[0]
        recs = job.fail(f"profiler crashed {RETRIES + 1} times", last["records"][0])
        return recs, dict(last.get("task") or {})
    if isinstance(exc, KilledWorker):
        cause = f"worker lost {ALLOWED_FAILURES + 1} times while running this shape"
    else:
        cause = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
    return job.fail(cause, None), {}


def _brief(records: list[dict[str, Any]], task: dict[str, Any]) -> dict[str, Any]:
    host = (records[0].get("host") or records[0].get("provenance") or {}) if records else {}
    secs = None
    if task.get("start") is not None and task.get("end") is not None:
        secs = round(task["end"] - task["start"], 3)
    first = records[0] if records else {}
    return {
        "result": first.get("status"),
        "failure": first.get("failure") or (first.get("extra") or {}).get("note"),
        "gpu": host.get("gpu_index"),
        "worker": task.get("worker"),
        "records": len(records),
        "seconds": secs,
    }
