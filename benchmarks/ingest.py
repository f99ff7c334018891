"""Ingestion throughput: a synthetic ckProfiler log of N `Perf:` lines built from the real sample
lines in ../shared/ckprofiler_samples/, ingested end to end (parse, name fields, SQLite) into a
fresh knowledge base. Each size runs in its own process so peak RSS is per size: flat memory means
the peak does not grow with the log.

    python3 benchmarks/ingest.py                 # 250,000 and 1,000,000 lines
    python3 benchmarks/ingest.py --lines 2000000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = Path(os.environ.get("CKKB_SAMPLES") or ROOT.parent / "shared" / "ckprofiler_samples")


def real_perf_lines() -> list[str]:
    lines = []
    for f in sorted(SAMPLES.glob("*.txt")):
        lines += [ln for ln in f.read_text().splitlines() if ln.startswith("Perf:")]
    return lines


def write_log(path: Path, n: int) -> int:
    perf = real_perf_lines()
    head = (SAMPLES / "001.txt").read_text().splitlines()[3:7]  # descriptors + 'found N instances'
    best = (SAMPLES / "001.txt").read_text().splitlines()[-1]
    with open(path, "w") as f:
        f.write("\n".join(head) + "\n")
        for i in range(n):
            f.write(perf[i % len(perf)] + "\n")
        f.write(best + "\n")
    return path.stat().st_size


def child(n: int) -> None:
    sys.path.insert(0, str(ROOT))
    from ckkb.kb.ingest import ingest  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "synthetic.log"
        size = write_log(log, n)
        t0, c0 = time.perf_counter(), time.process_time()
        s = ingest(Path(d) / "kb.db", [log], arch="gfx942")
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert s.results_added == n, (s.results_added, n)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            json.dumps(
                {
                    "lines": n,
                    "mb": size / 2**20,
                    "seconds": dt,
                    "cpu": cpu,
                    "rate": n / dt,
                    "peak_rss_mb": rss,
                }
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, nargs="*", default=[250_000, 1_000_000])
    ap.add_argument("--child", type=int, default=None)
    a = ap.parse_args()
    if a.child is not None:
        child(a.child)
        return
    rows = []
    for n in a.lines:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(n)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(
        f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f} "
        "(wall-clock rates drop on a busy machine; CPU s is the process's own time)"
    )
    print(
        f"{'Perf lines':>12} {'log MB':>8} {'wall s':>8} "
        f"{'CPU s':>8} {'lines/s':>10} {'peak RSS MB':>12}"
    )
    for r in rows:
        print(
            f"{r['lines']:>12,} {r['mb']:>8.1f} {r['seconds']:>8.2f} "
            f"{r['cpu']:>8.2f} {r['rate']:>10,.0f} {r['peak_rss_mb']:>12.1f}"
        )
    if len(rows) > 1:
        a0, b0 = rows[0], rows[-1]
        print(
            f"ratios (largest/smallest): lines {b0['lines'] / a0['lines']:.1f}x, "
            f"time {b0['seconds'] / a0['seconds']:.2f}x, "
            f"peak RSS {b0['peak_rss_mb'] / a0['peak_rss_mb']:.2f}x"
        )
    goal = 100_000
    big = [r for r in rows if r["lines"] >= 1_000_000] or rows[-1:]
    rates = ", ".join(format(r["rate"], ",.0f") for r in big)
    verdict = "met" if all(r["rate"] >= goal for r in big) else "NOT met"
    print(f"goal >= {goal:,} lines/s on >= 1,000,000 lines: {verdict} ({rates} lines/s)")


if __name__ == "__main__":
    main()
