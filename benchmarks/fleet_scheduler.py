"""Scheduler throughput: 10,000 no-op tasks on a Dask LocalCluster, submitted and collected the
way the fleet driver does (one `client.submit` per task, `as_completed`, result per task).

    python3 benchmarks/fleet_scheduler.py [--tasks 10000] [--workers 2]

Two rows: tasks that ask for nothing (Dask's best case: many in flight per worker) and tasks
that ask for `GPU=1` on workers that offer one (the fleet's case: one task in flight per worker,
so each task costs a full worker -> scheduler -> worker round trip). Prints tasks/s and the cost
per task, and the bundle bytes per result of the committed H200 bundles.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def noop(i: int) -> int:
    return i


def run(client, n: int, resources: dict | None) -> float:
    from distributed import as_completed

    t0 = time.perf_counter()
    futs = [
        client.submit(noop, i, key=f"noop-{resources is not None}-{i}", resources=resources)
        for i in range(n)
    ]
    got = 0
    for f in as_completed(futs):
        f.result()
        f.release()
        got += 1
    assert got == n
    return time.perf_counter() - t0


def bundle_bytes() -> list[tuple[str, int, int]]:
    out = []
    for p in sorted((ROOT / "benchmarks" / "results" / "fleet_h200").glob("*.jsonl")):
        recs = [x for x in p.read_text().splitlines()[1:] if '"harness_results"' in x]
        out.append((p.name, len(recs), sum(len(x) + 1 for x in recs)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=a.workers,
            threads_per_worker=1,
            resources={"GPU": 1},
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        run(client, 200, None)  # warm-up: imports, connections
        rows = []
        for label, res in (("no resources", None), ("GPU=1 each (the fleet)", {"GPU": 1})):
            s = run(client, a.tasks, res)
            rows.append((label, s))
    print(f"{a.tasks} no-op tasks, LocalCluster of {a.workers} workers x 1 thread")
    print("| tasks ask for | seconds | tasks/s | ms per task |")
    print("| --- | --- | --- | --- |")
    for label, s in rows:
        print(f"| {label} | {s:.2f} | {a.tasks / s:,.0f} | {1000 * s / a.tasks:.3f} |")
    print("\nbundle bytes per harness result (committed H200 bundles)")
    print("| bundle | results | bytes | bytes/result |")
    print("| --- | --- | --- | --- |")
    for name, n, b in bundle_bytes():
        print(f"| {name} | {n} | {b:,} | {b / max(n, 1):,.0f} |")
    print(json.dumps({"tasks": a.tasks, "workers": a.workers, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
