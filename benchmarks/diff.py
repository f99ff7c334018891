"""`ckkb diff` between two CK trees: CPU time and output size of the whole-tree diff (issue 15).

    python3 benchmarks/diff.py [--db PATH] [--from 1.1.0] [--to 1.2.0] [--runs N]
        [--base DIR [--base-db PATH]]

--db: a knowledge base holding both trees; without it one is built in a temporary directory
the way a user would (`ckkb build`, then `ckkb build --ck ../shared/trees/composable_kernel`):
the wheel's CK is 1.2.0, the 2024-10 tree 1.1.0. Each case runs `python -m ckkb diff ...` as a
subprocess (stdout to a file) and reports the median CPU time (user+sys of the child, from
getrusage: the machine is shared, wall time is noise) and wall time of N runs, and the bytes
written. --base DIR: a checkout of another ckkb (e.g. `git archive main | tar -x -C DIR`) run the
same way, interleaved with this one (A, B, A, B ...), and the ratio base/this per case;
--base-db: the same trees built by that checkout, where its schema version differs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
CK_OLD = ROOT.parent / "shared" / "trees" / "composable_kernel"

CASES = {
    "whole tree --json": ["--json"],
    "whole tree, text": [],
    "gemm_universal bf16 gfx942 --json": [
        "--dir",
        "gemm_universal",
        "--dtype",
        "bf16",
        "--arch",
        "gfx942",
        "--json",
    ],
}


def run(code: Path, args: list[str], out: Path) -> tuple[float, float, int]:
    """(CPU seconds of the child, wall seconds, bytes written) of `python -m ckkb ARGS`."""
    env = dict(ENV, PYTHONPATH=str(code), COLUMNS="120")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with open(out, "wb") as f:
        p = subprocess.run(
            [sys.executable, "-m", "ckkb", *args],
            stdout=f,
            stderr=subprocess.PIPE,
            env=env,
            cwd=code,  # `-m` puts the working directory first on sys.path
        )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"ckkb {' '.join(args)} failed:\n{p.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, out.stat().st_size


def build(db: Path) -> None:
    for extra in ([], ["--ck", str(CK_OLD)]):
        subprocess.run(
            [sys.executable, "-m", "ckkb", "build", "--db", str(db), *extra],
            check=True,
            env=dict(ENV, PYTHONPATH=str(ROOT)),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path)
    ap.add_argument("--from", dest="old", default="1.1.0")
    ap.add_argument("--to", dest="new", default="1.2.0")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--base", type=Path, help="another ckkb checkout to compare with")
    ap.add_argument("--base-db", type=Path, help="its knowledge base (default: --db)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckkb-bench-diff-") as tmp:
        db = a.db
        if db is None:
            db = Path(tmp) / "kb.db"
            build(db)
        codes = {"this": ROOT} | ({"base": a.base.resolve()} if a.base else {})
        dbs = {"this": db, "base": a.base_db or db}
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        got: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        for case, extra in CASES.items():
            for _ in range(a.runs):
                for label, code in codes.items():
                    args = ["diff", a.old, a.new, "--db", str(dbs[label]), *extra]
                    out = Path(tmp) / f"{label}.out"
                    got.setdefault((case, label), []).append(run(code, args, out))
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"\n`ckkb diff {a.old} {a.new}`: median of {a.runs} runs (CPU = user+sys of the child)")
    head = f"{'case':<36} {'code':<5} {'CPU s':>7} {'wall s':>7} {'MB out':>8}"
    print(head + ("  base/this CPU" if a.base else ""))
    for case in CASES:
        for label in codes:
            runs = got[(case, label)]
            cpu = statistics.median(r[0] for r in runs)
            wall = statistics.median(r[1] for r in runs)
            line = f"{case:<36} {label:<5} {cpu:7.2f} {wall:7.2f} {runs[0][2] / 1e6:8.2f}"
            if a.base and label == "this":
                base = statistics.median(r[0] for r in got[(case, "base")])
                line += f"  {base / cpu:.2f}x"
            print(line)


if __name__ == "__main__":
    main()
