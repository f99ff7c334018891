"""Compare harness bundles of the same shapes timed in different ways (benchmarks/fleet_h200.py).

    python3 benchmarks/fleet_compare.py benchmarks/results/fleet_h200 [--base plain]

(`--base gpus1` for a two-GPU call of `fleet_h200.py --modes gpus1,gpus`: one GPU against all.)

Prints, for every bundle against `plain`: how far the same (shape, candidate, regime, pass)
timing moved (median, p90, max of |x - plain| / plain), beside the run-to-run spread inside one
run (|pass 2 - pass 1| / pass 1) and between two plain runs (plain2 against plain); and for the
fleet bundles the scheduling cost per shape: the time a worker sat idle between the end of one
task and the start of its next (Dask's round trip), against the mean task time, and when the
driver received each result after the task ended. Walls come from walls.json.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def load(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines()[1:] if x.strip()]


def timings(recs: list[dict]) -> dict[tuple, float]:
    out = {}
    for r in recs:
        if r.get("record") == "harness_results" and r.get("status") == "ok" and r.get("us"):
            k = (r["M"], r["N"], r["K"], r["dtype"], r["candidate"], r["regime"], r["pass_no"])
            out[k] = r["us"]
    return out


def q(xs: list[float], f: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(f * (len(xs) - 1) + 0.5))]


def stats(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    return (
        f"n={len(xs)} median {100 * statistics.median(xs):.2f}% p90 {100 * q(xs, 0.9):.2f}% "
        f"max {100 * max(xs):.2f}%"
    )


def diffs(a: dict, b: dict) -> list[float]:
    return [abs(b[k] - a[k]) / a[k] for k in a if k in b]


def tasks(recs: list[dict]) -> list[dict]:
    seen = {}
    for r in recs:
        t = r.get("task") or (r.get("extra") or {}).get("task")
        if t and t.get("start") is not None:
            seen[(t.get("worker"), t["start"])] = t
    return sorted(seen.values(), key=lambda t: (str(t.get("worker")), t["start"]))


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?", default="benchmarks/results/fleet_h200", type=Path)
    ap.add_argument("--base", default="plain", help="the bundle the others are compared with")
    a = ap.parse_args()
    folder = a.folder
    walls = json.loads((folder / "walls.json").read_text())
    bundles = {p.stem: load(p) for p in sorted(folder.glob("*.jsonl"))}
    plain = timings(bundles[a.base])
    p1 = {k[:-1]: v for k, v in plain.items() if k[-1] == 1}
    p2 = {k[:-1]: v for k, v in plain.items() if k[-1] == 2}
    print(f"{walls['shapes']} shapes x {walls['passes']} passes; {len(plain)} {a.base} timings")
    print(f"run-to-run inside {a.base} (pass 2 vs pass 1): {stats(diffs(p1, p2))}")
    print(
        f"| bundle | wall s | vs {a.base} (same pass) | tasks | idle gap per task | task mean | "
        "gap/task | result received after end |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, recs in bundles.items():
        wall = (walls.get(name) or {}).get("wall_s")
        t = timings(recs)
        vs = stats(diffs(plain, t)) if name != a.base else "-"
        ts = tasks(recs)
        if ts:
            gaps = [
                b["start"] - a["end"]
                for a, b in zip(ts, ts[1:], strict=False)
                if a.get("worker") == b.get("worker")
            ]
            durs = [x["end"] - x["start"] - x.get("setup_seconds", 0) for x in ts]
            recv = [x["received"] - x["end"] for x in ts if x.get("received")]
            g, d = statistics.mean(gaps), statistics.mean(durs)
            extra = (
                f"{len(ts)} | {1000 * g:.2f} ms | {1000 * d:.1f} ms | {100 * g / d:.2f}% | "
                f"median {1000 * statistics.median(recv):.1f} ms, max {1000 * max(recv):.0f} ms"
            )
        else:
            extra = "- | - | - | - | -"
        print(f"| {name} | {wall} | {vs} | {extra} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
