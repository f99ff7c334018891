"""On a GPU host: time the same shapes with `ckkb harness` in several ways, one after the other.

    python3 benchmarks/fleet_h200.py OUT [--shapes N] [--passes P] [--modes plain,gpus,cluster]

Modes: `plain` (no Dask), `gpus` (`--gpus all`: a local Dask cluster, one worker per GPU),
`gpus1` (`--gpus 1`: the first GPU only), `cluster` (a Dask LocalCluster of one worker with
GPU=1, started here, reached through `--scheduler`). Each mode writes OUT/<mode>.jsonl; the walls
go to OUT/walls.json and every mode's output to OUT/log.txt. `benchmarks/fleet_compare.py`
reads them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--shapes", type=int, default=40)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--modes", default="plain,gpus,cluster")
    ap.add_argument("--csv", type=Path, default=ROOT / "benchmarks" / "harness_shapes_h200.csv")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    lines = a.csv.read_text().splitlines()
    shapes = Path("/tmp/fleet_shapes.csv")
    shapes.write_text("\n".join(lines[: a.shapes + 1]) + "\n")
    log = open(a.out / "log.txt", "a")
    walls: dict[str, object] = {"shapes": a.shapes, "passes": a.passes}
    base = [sys.executable, "-m", "ckkb.harness", "--shapes", str(shapes), "--quiet"]
    base += ["--passes", str(a.passes)]
    for mode in a.modes.split(","):
        argv = base + ["--out", str(a.out / f"{mode}.jsonl")]
        cluster = None
        if mode == "gpus":
            argv += ["--gpus", "all"]
        elif mode == "gpus1":
            argv += ["--gpus", "1"]
        elif mode == "cluster":
            from distributed import LocalCluster

            t0 = time.monotonic()
            cluster = LocalCluster(
                n_workers=1,
                threads_per_worker=1,
                resources={"GPU": 1},
                dashboard_address=None,
            )
            walls["cluster_start_s"] = round(time.monotonic() - t0, 3)
            argv += ["--scheduler", cluster.scheduler_address]
        log.write(f"\n=== {mode}: {' '.join(argv)}\n")
        log.flush()
        t0 = time.monotonic()
        rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT).returncode
        wall = time.monotonic() - t0
        if cluster is not None:
            cluster.close()
        walls[mode] = {"wall_s": round(wall, 3), "rc": rc}
        print(f"{mode}: {wall:.1f} s rc={rc}", flush=True)
        (a.out / "walls.json").write_text(json.dumps(walls, indent=1))
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
