"""Build speed on the default tree (the installed amd-aiter wheel): issue 12's speed goals.

    python3 benchmarks/build.py [--ck PATH] [--aiter PATH] [--jobs N] [--no-aiter] [--rounds N]

In each of N rounds (default 3; the ratios printed are the medians of the rounds' ratios):
  1. reference: a bare, single-process tree-sitter parse of every .cpp/.hpp/.in file under the
     directories the CK extractors read (instances, device-op impl headers, the gridwise headers
     a device op's GetTypeString() delegates to, factory headers, profiler sources and their
     profile_*_impl.hpp headers) and the two single headers the registrations read, reading each
     file and parsing it once;
  2. cold `ckkb build`: fresh database and cache in a temporary directory (default jobs, or --jobs);
  3. warm rebuild of the same database with no source change;
  4. the reference again. A round's ratios divide by the mean of its two references, which
     bracket the builds: this shared machine's speed drifts by 10-30% within minutes, and a
     reference taken only before the builds can be off by that much for them.
Each build runs as a subprocess (`python -m ckkb.cli build`), so its peak memory is its own
(`os.wait4` rusage: the process and the workers it reaped). Prints the three times, both ratios
against issue 12's goals (cold <= 1.3x reference, warm <= 0.1x; issue 2 asked 1.0x before the
restructure) and the peak memory against issue 2's (<= 1 GB); then where the cold build's time
goes: the CPU seconds of its process tree, and per stage (`ckkb build --json` timings) the
workers' extraction CPU, the parent's combine CPU and insert time, and when each stage's last file
was extracted and its rows were in.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ckkb import sources  # noqa: E402
from ckkb.extract import (  # noqa: E402
    cpp,  # noqa: E402
    profiler,
    registrations,
    typestrings,
)
from ckkb.extract.files import list_files  # noqa: E402
from ckkb.extract.include_dirs import factory_dirs  # noqa: E402
from ckkb.extract.instance_roots import instance_roots  # noqa: E402

# Every fixed directory a CK stage reads files from (each stage's own constant), and the single
# files; the instance roots and factory directories are read from the tree (`dirs`).
DIRS = (
    sources.CK_IMPL_DIR,
    typestrings.GRID_DIR,
    sources.CK_PROFILER_DIR,
    profiler.IMPL_DIR,
)
FILES = (registrations.CK_HPP, registrations.DEVICE_PROP_HPP)
SUFFIXES = (".cpp", ".hpp", ".in")
COLD_GOAL = 1.3  # cold build / reference (issue 12)
WARM_GOAL = 0.1  # warm rebuild / reference
PEAK_GOAL_MIB = 1024


def dirs(root: Path) -> tuple[str, ...]:
    """The directories the CK stages read in the tree at `root`."""
    return (*instance_roots(root).roots, *DIRS[:2], *factory_dirs(root), *DIRS[2:])


def reference(root: Path) -> tuple[float, int, int, dict[str, int]]:
    """Seconds to read and parse every file once, in this process; files, bytes, files per dir."""
    files = {d: list_files(root, d, SUFFIXES) for d in dirs(root)}
    files["(single files)"] = [root / f for f in FILES if (root / f).is_file()]
    cpp.parse(b"int x;")  # load the grammar outside the timing
    t0 = time.perf_counter()
    n = size = 0
    for paths in files.values():
        for p in paths:
            data = p.read_bytes()
            cpp.parse(data)
            n += 1
            size += len(data)
    return time.perf_counter() - t0, n, size, {d: len(v) for d, v in files.items()}


@dataclass
class Run:
    seconds: float
    status: int
    peak_kib: int  # peak RSS of the build and its workers
    cpu: float  # user + system CPU seconds of the build and its workers
    line: str  # what to print for it
    timings: dict[str, dict[str, float]]  # `ckkb build --json` timings (empty without --json)


def run_build(args: list[str], env: dict[str, str]) -> Run:
    """One `ckkb build` subprocess, timed; with --json in args, its per-stage timings too."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckkb.cli", "build", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
    )
    out = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    secs = time.perf_counter() - t0
    last = [ln for ln in out.splitlines() if ln.strip()]
    line, timings = last[-1] if last else "", {}
    if "--json" in args:
        try:
            summary = json.loads(out)
        except ValueError:
            pass
        else:
            timings = summary.get("timings", {})
            line = (
                f"{summary.get('files')} files ({summary.get('parsed')} parsed), "
                f"{len(summary.get('diagnostics', []))} diagnostics"
            )
    cpu = usage.ru_utime + usage.ru_stime
    return Run(secs, os.waitstatus_to_exitcode(status), usage.ru_maxrss, cpu, line, timings)


def breakdown(runs: list[Run]) -> list[str]:
    """Where a cold build's time goes: CPU of the process tree, then per stage (in the order the
    stages' rows were in) the workers' extraction CPU, the combine's CPU and the insert (seconds,
    in the parent), and when the stage's last file was extracted and its rows were in."""
    run = runs[-1]
    stages = {k: v for k, v in run.timings.items() if not k.startswith("(")}
    extract = sum(v.get("extract_cpu", 0.0) for v in stages.values())
    combine = sum(v.get("combine_cpu", 0.0) for v in stages.values())
    insert = sum(v.get("insert", 0.0) for v in stages.values())
    out = [
        f"cold build CPU (user+sys, parent and workers), median of the rounds: "
        f"{statistics.median(r.cpu for r in runs):.1f} s; last round {run.cpu:.1f} s: "
        f"extraction in workers {extract:.1f}, combines {combine:.1f} and inserts {insert:.1f} "
        f"in the parent",
        f"{'stage':<20} {'extract cpu':>11} {'combine cpu':>11} {'insert s':>9} "
        f"{'extracted at':>12} {'combined at':>11}",
    ]
    for name, v in sorted(stages.items(), key=lambda kv: kv[1].get("combined_at", 0.0)):
        out.append(
            f"{name:<20} {v.get('extract_cpu', 0.0):>11.2f} {v.get('combine_cpu', 0.0):>11.2f} "
            f"{v.get('insert', 0.0):>9.2f} {v.get('extracted_at', 0.0):>12.2f} "
            f"{v.get('combined_at', 0.0):>11.2f}"
        )
    phases = run.timings.get("(build)", {})
    out.append(", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ck", default=None, help="CK tree (default: the wheel's)")
    ap.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="build workers (default: ckkb's default, one per core)",
    )
    ap.add_argument("--no-aiter", action="store_true", help="build the CK tree only")
    ap.add_argument("--aiter", default=None, help="aiter tree (default: the wheel's)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of (reference, cold, warm); the ratios are their medians",
    )
    a = ap.parse_args()

    tree = sources.ck_tree(a.ck)
    env = dict(os.environ)
    env.pop("CKKB_DB", None)
    if a.jobs is None:
        env.pop("CKKB_JOBS", None)
    jobs = a.jobs or (os.cpu_count() or 1)
    rounds = []  # (reference s: mean of the two, cold s, warm s, cold peak KiB, warm peak KiB)
    refs = []  # (reference before the builds, after them) per round
    colds: list[Run] = []
    for _ in range(max(1, a.rounds)):
        # each round measures the three back to back, so a round's ratios share the machine's state
        # (this shared machine's speed drifts by 10-20% over minutes)
        ref_before, n_files, n_bytes, per_dir = reference(tree.root)
        with tempfile.TemporaryDirectory(prefix="ckkb-bench-") as tmp:
            db = Path(tmp) / "ckkb.db"
            args = ["--db", str(db), "--jobs", str(jobs)]
            if a.ck:
                args += ["--ck", a.ck]
            if a.no_aiter:
                args.append("--no-aiter")
            elif a.aiter:
                args += ["--aiter", a.aiter]
            cold = run_build([*args, "--json"], env)
            warm = run_build(args, env)
            db_mb = db.stat().st_size / 2**20 if db.exists() else 0.0
        if cold.status or warm.status:
            print(
                f"build failed (cold exit {cold.status}, warm "
                f"exit {warm.status}): {cold.line} / {warm.line}"
            )
            return 1
        ref_after = reference(tree.root)[0]
        refs.append((ref_before, ref_after))
        ref_s = (ref_before + ref_after) / 2
        rounds.append((ref_s, cold.seconds, warm.seconds, cold.peak_kib, warm.peak_kib))
        colds.append(cold)
    ref_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    print(f"CK tree: {tree.root} (version {tree.version}, wheel {tree.wheel_version})")
    print(
        f"reference input: {n_files} files, {n_bytes / 2**20:.1f} MiB: "
        + ", ".join(f"{d} {k}" for d, k in per_dir.items())
    )
    print(
        f"build: jobs={jobs}{' --no-aiter' if a.no_aiter else ' (CK + aiter trees)'}, "
        f"cpus={os.cpu_count()}; database {db_mb:.1f} MiB"
    )
    print(f"cold: {cold.line}")
    print(f"warm: {warm.line}")
    print()
    print(
        f"{'round':<6} {'ref before':>11} {'ref after':>10} {'ref mean':>9} "
        f"{'cold s':>8} {'cold/ref':>9} {'warm s':>8} {'warm/ref':>9}"
    )
    for k, ((r, c, w, _, _), (ra, rb)) in enumerate(zip(rounds, refs, strict=True), start=1):
        print(
            f"{k:<6} {ra:>11.2f} {rb:>10.2f} {r:>9.2f} "
            f"{c:>8.2f} {c / r:>8.2f}x {w:>8.2f} {w / r:>8.3f}x"
        )
    med = statistics.median
    ref_m, cold_m, warm_m = (
        med(r[0] for r in rounds),
        med(r[1] for r in rounds),
        med(r[2] for r in rounds),
    )
    cold_ratio, warm_ratio = med(r[1] / r[0] for r in rounds), med(r[2] / r[0] for r in rounds)
    cold_rss, warm_rss = max(r[3] for r in rounds), max(r[4] for r in rounds)
    print()
    cold_goal, warm_goal = f"<= {COLD_GOAL:.1f}x", f"<= {WARM_GOAL:.1f}x"
    rows = [
        ("reference: bare tree-sitter parse, 1 process", ref_m, "1.00x", "", ref_rss),
        ("cold ckkb build (fresh db + cache)", cold_m, f"{cold_ratio:.2f}x", cold_goal, cold_rss),
        ("warm rebuild (no source change)", warm_m, f"{warm_ratio:.3f}x", warm_goal, warm_rss),
    ]
    print(
        f"{'run (median of ' + str(len(rounds)) + ' rounds)':<46} "
        f"{'seconds':>8} {'ratio':>8} {'goal':>8} {'peak RSS':>10}"
    )
    print("-" * 84)
    for name, sec, r, goal, rss in rows:
        print(f"{name:<46} {sec:>8.2f} {r:>8} {goal:>8} {rss / 1024:>7.0f} MiB")
    peak = max(cold_rss, warm_rss) / 1024
    print("-" * 84)
    print(
        f"cold/reference {cold_ratio:.2f}x (goal {cold_goal}: "
        f"{'met' if cold_ratio <= COLD_GOAL else 'NOT met'}); "
        f"warm/reference {warm_ratio:.3f}x (goal {warm_goal}: "
        f"{'met' if warm_ratio <= WARM_GOAL else 'NOT met'}); "
        f"peak {peak:.0f} MiB (goal <= {PEAK_GOAL_MIB} MiB: "
        f"{'met' if peak <= PEAK_GOAL_MIB else 'NOT met'})"
    )
    print()
    print("Where the time goes (`ckkb build --json` of the cold builds):")
    for line in breakdown(colds):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
