"""`ckkb audit` speed on the whole default aiter config set (of the amd-aiter wheel): issue 5.

    python3 benchmarks/audit.py [--aiter PATH] [--repeat N]

  1. cold: an empty extraction cache, so every kernel-list / tuner / core.py file is parsed with
     libcst, then every config CSV read and every rule run (in-process, library call);
  2. warm: the same audit again, libcst results served from the content-hash cache;
  3. the CLI end to end (`python -m ckkb audit --format json`), warm, as a subprocess (includes
     interpreter start-up and imports).
Prints seconds, rows per second and the warm ratio against the goal (< 2 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ckkb.audit.engine import audit  # noqa: E402

GOAL_WARM_S = 2.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aiter", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["CKKB_CACHE_DIR"] = cache
        colds, warms = [], []
        for _ in range(args.repeat):
            for p in Path(cache).rglob("*.pickle"):
                p.unlink()
            t0 = time.perf_counter()
            r = audit(args.aiter)
            colds.append(time.perf_counter() - t0)
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            r = audit(args.aiter)
            warms.append(time.perf_counter() - t0)
        cli = []
        cmd = [sys.executable, "-m", "ckkb", "audit", "--format", "json"] + (
            ["--aiter", args.aiter] if args.aiter else []
        )
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run(
                cmd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=os.environ.copy(),
                check=False,
            )
            cli.append(time.perf_counter() - t0)
    rows, files = r.rows, len(r.files)
    c = r.counts()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"default aiter config set: {files} CSV files, {rows} rows; {len(r.findings)} findings "
        f"({c['error']} errors, {c['warning']} warnings, "
        f"{c['note']} notes); median of {args.repeat}"
    )
    print(f"{'run':<34}{'seconds':>9}{'rows/s':>12}")
    for name, xs in (
        ("cold (libcst extraction + audit)", colds),
        ("warm (cached extraction)", warms),
        ("CLI warm, subprocess", cli),
    ):
        m = statistics.median(xs)
        print(f"{name:<34}{m:>9.3f}{rows / m:>12,.0f}")
    w = statistics.median(warms)
    print(
        f"warm / goal ({GOAL_WARM_S:.0f} s): {w / GOAL_WARM_S:.2f}x "
        f" ({'met' if w < GOAL_WARM_S else 'NOT met'}); "
        f"cold / warm: {statistics.median(colds) / w:.1f}x"
    )


if __name__ == "__main__":
    main()
