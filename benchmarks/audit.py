"""`ckkb audit` speed on the whole default aiter config set (the installed amd-aiter wheel):
issue 5.

    python3 benchmarks/audit.py [--aiter PATH] [--repeat N]

  1. in-process: every kernel-list / tuner / core.py file parsed with libcst (no cache: the
     build's content-hash cache is ckkb's only cache), every config CSV read, every rule run;
  2. the CLI end to end (`python -m ckkb audit --format json`) as a subprocess (includes
     interpreter start-up and imports).
Prints seconds, rows per second and the ratio against the goal (< 2 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ckkb.audit.engine import audit  # noqa: E402

GOAL_S = 2.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aiter", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        r = audit(args.aiter)
        runs.append(time.perf_counter() - t0)
    cli = []
    cmd = [sys.executable, "-m", "ckkb", "audit", "--format", "json"]
    cmd += ["--aiter", args.aiter] if args.aiter else []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        cli.append(time.perf_counter() - t0)
    rows, files = r.rows, len(r.files)
    c = r.counts()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"default aiter config set: {files} CSV files, {rows} rows; {len(r.findings)} findings "
        f"({c['error']} errors, {c['warning']} warnings, {c['note']} notes); "
        f"median of {args.repeat}"
    )
    print(f"{'run':<34}{'seconds':>9}{'rows/s':>12}")
    for name, xs in (("in-process (extraction + audit)", runs), ("CLI, subprocess", cli)):
        m = statistics.median(xs)
        print(f"{name:<34}{m:>9.3f}{rows / m:>12,.0f}")
    m = statistics.median(cli)
    print(f"CLI / goal ({GOAL_S:.0f} s): {m / GOAL_S:.2f}x  ({'met' if m < GOAL_S else 'NOT met'})")


if __name__ == "__main__":
    main()
